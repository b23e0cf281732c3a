"""``attn-gui corpus``: per-head statistics of a model over a corpus, in-process or on Ray."""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys

from .common import Command, UsageError, load_model, one_line
from .terminal import passages_progress, raising_interrupts


def add_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("--model", required=True, metavar="NAME|PATH", help="a bundled model, a folder or a .gguf file")
    c.add_argument("--corpus", required=True, metavar="FILE",
                   help="a text file (one passage per line), .jsonl, .parquet or a datasets save_to_disk folder")
    c.add_argument("--out", required=True, metavar="DIR",
                   help="folder for heads.parquet, examples.parquet and manifest.json: new, empty, or a census of the "
                        "same inputs (a run stopped there resumes)")
    c.add_argument("--field", metavar="F", help="the text field of JSONL, Parquet or a datasets folder (default text)")
    c.add_argument("--ray", metavar="local|HOST:PORT", help="run on a local Ray, or join a running cluster")
    c.add_argument("--workers", type=int, metavar="N",
                   help="Ray actors (default: one per core of the local Ray or the cluster); without --ray, "
                        "torch's CPU threads")
    c.add_argument("--pattern", metavar='"from RE to RE > X"',
                   help="count per head the (query, key) token pairs matching the two regular expressions "
                        "weighted above X, e.g. \"from ^the$ to . > 0.5\"")
    c.add_argument("--compare", metavar="NAME|PATH",
                   help="a second model (same tokens, layers and heads): adds each head's mean Jensen-Shannon "
                        "divergence and ||dW_QK||, ||dW_OV|| where the shapes agree")
    c.add_argument("--top-k", type=int, default=5, metavar="K", help="examples kept per head and statistic, "
                                                                     "1 to 100 (default 5)")
    c.add_argument("--shard-size", type=int, default=32, metavar="N", help="passages per shard (default 32)")


def run_corpus(args: argparse.Namespace) -> int:
    """``attn-gui corpus``: a progress line on a terminal's stderr, the summary on stdout."""
    from ..engine.analysis.corpus.stats import Pattern
    from ..engine.analysis.corpus.shards import Settings, check_models
    from ..engine.analysis.corpus.census import census, run_in_process
    from ..engine.analysis.corpus.read import read_corpus

    if args.workers is not None and not 1 <= args.workers <= 4096:
        raise UsageError(f"attn-gui corpus: --workers must be 1 to 4096, not {args.workers}")
    settings = Settings(model=args.model, top_k=args.top_k, shard_size=args.shard_size,
                        pattern=None if args.pattern is None else Pattern.parse(args.pattern),
                        compare=args.compare)
    passages = read_corpus(args.corpus, args.field)
    check_models(settings)
    if args.ray is not None:
        from ..engine.analysis.corpus import ray as corpus_ray

        runner = corpus_ray.runner(args.ray, args.workers)
        if args.ray != "local":  # refused at once, not after loading the model
            corpus_ray.check_address(args.ray)
    else:
        runner = functools.partial(run_in_process, threads=args.workers)
    for name in filter(None, (args.model, args.compare)):
        load_model(name)  # converted once here, not by every worker at once
    progress = passages_progress("corpus", rate=True)

    def notice(line: str) -> None:
        print(f"attn-gui corpus: {one_line(line)}", file=sys.stderr)

    with raising_interrupts() if args.ray is not None else contextlib.nullcontext():
        result = census(passages, args.out, settings, runner=runner, progress=progress, notice=notice,
                        about={"ray": args.ray, "workers": args.workers})
    m = result.manifest
    rate = f", {m['passages_per_second']:.1f} passages/s" if m["passages_per_second"] else ""
    print(f"wrote heads.parquet, examples.parquet and manifest.json to {one_line(args.out)} ({m['passages']:,} "
          f"passages, {m['tokens']:,} tokens, {m['cut']:,} cut to {m['max_tokens']} tokens; {result.shards} shards, "
          f"{result.resumed} resumed{rate})")
    if m["dla_not_computed"]:
        print(f"no dla column: {m['dla_not_computed']}")
    return 0


COMMAND = Command("corpus", "per-head statistics (previous-token, duplicate, induction, sink, distance, entropy, "
                            "next-token DLA) over a corpus, with top examples; on Ray with --ray", add_arguments,
                  run_corpus)
