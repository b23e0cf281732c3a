"""``attn-gui lens``: fit a Jacobian lens over a corpus (in process or on Ray), and read a sentence through it beside
the logit lens."""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys

from .common import Command, UsageError, load_model, one_line
from .terminal import passages_progress, raising_interrupts


def add_arguments(c: argparse.ArgumentParser) -> None:
    sub = c.add_subparsers(dest="lens_command", required=True, parser_class=type(c), metavar="{fit,read}")
    f = sub.add_parser("fit", help="fit a Jacobian lens over a corpus into a folder (resumable)")
    f.add_argument("--model", required=True, metavar="NAME|PATH", help="a bundled model, a folder or a .gguf file")
    f.add_argument("--corpus", required=True, metavar="FILE",
                   help="a text file (one passage per line), .jsonl, .parquet or a datasets save_to_disk folder")
    f.add_argument("--out", required=True, metavar="DIR",
                   help="folder for lens.pt (TransformerLens' format), manifest.json and shards/: new, empty, or a "
                        "fit of the same inputs (a run stopped there resumes)")
    f.add_argument("--field", metavar="F", help="the text field of JSONL, Parquet or a datasets folder (default text)")
    f.add_argument("--ray", metavar="local|HOST:PORT", help="run on a local Ray, or join a running cluster")
    f.add_argument("--workers", type=int, metavar="N", help="Ray actors (default one per core); without --ray, "
                                                            "torch's CPU threads")
    f.add_argument("--max-seq-len", type=int, default=128, metavar="N", help="tokens read per passage (default 128)")
    f.add_argument("--skip-first", type=int, default=16, metavar="N",
                   help="leading positions left out of the average (default 16, as TransformerLens)")
    f.add_argument("--dim-batch", type=int, default=8, metavar="N",
                   help="output dimensions per backward pass (default 8)")
    f.add_argument("--layers", metavar="L,L,...", help="source layers (default every layer below the last)")
    f.add_argument("--shard-size", type=int, default=8, metavar="N", help="passages per shard (default 8)")
    f.add_argument("--dtype", default="float32", choices=("float32", "float64", "bfloat16"),
                   help="float32 (default), float64, or bfloat16 matmuls on the stored weights (CPU)")
    f.add_argument("--device", default="cpu", metavar="D", help="where the fit runs: cpu (default), cuda, cuda:N, mps")
    f.set_defaults(run=run_fit)
    r = sub.add_parser("read", help="a sentence's top tokens at every layer and position, logit lens and J-lens")
    r.add_argument("--model", required=True, metavar="NAME|PATH", help="the model the lens was fitted on")
    r.add_argument("--lens", required=True, metavar="DIR|FILE", help="a fit's folder or a lens .pt file")
    r.add_argument("--sentence", required=True, metavar="S", help="the text to read")
    r.add_argument("--top-k", type=int, default=1, metavar="K", help="tokens shown per cell, 1 to 10 (default 1)")
    r.add_argument("--device", default="cpu", metavar="D", help="where the read runs: cpu (default), cuda, cuda:N, mps")
    r.set_defaults(run=run_read)


def _layers(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"attn-gui lens fit: --layers takes layer numbers separated by commas, not {text!r}") \
            from None


def run_fit(args: argparse.Namespace) -> int:
    """``attn-gui lens fit``: a progress line on a terminal's stderr, the summary on stdout."""
    from ..engine.analysis.corpus.read import read_corpus
    from ..engine.analysis.lens import fit
    from ..engine.analysis.lens.jacobian import LensSettings

    if args.workers is not None and not 1 <= args.workers <= 4096:
        raise UsageError(f"attn-gui lens fit: --workers must be 1 to 4096, not {args.workers}")
    settings = LensSettings(model=args.model, dim_batch=args.dim_batch, max_seq_len=args.max_seq_len,
                            skip_first_positions=args.skip_first, source_layers=_layers(args.layers),
                            shard_size=args.shard_size, dtype=args.dtype, device=args.device)
    passages = read_corpus(args.corpus, args.field)
    settings.layers  # noqa: B018  the model resolved and its layers checked before any compute
    if args.ray is not None:
        from ..engine.analysis.corpus import ray as corpus_ray

        if args.ray != "local":
            corpus_ray.check_address(args.ray)
        runner = fit.ray_runner(args.ray, args.workers)
    else:
        runner = functools.partial(fit.run_in_process, threads=args.workers)
    load_model(args.model)

    def notice(line: str) -> None:
        print(f"attn-gui lens: {one_line(line)}", file=sys.stderr)

    with raising_interrupts() if args.ray is not None else contextlib.nullcontext():
        done = fit.fit_lens(passages, args.out, settings, runner=runner, notice=notice,
                            progress=passages_progress("lens"))
    m = done.manifest
    print(f"wrote lens.pt and manifest.json to {one_line(args.out)}: layers {done.lens.source_layers[0]} to "
          f"{done.lens.source_layers[-1]}, {m['prompts']:,} prompts ({m['skipped_short']:,} too short skipped), "
          f"{done.shards} shards, {done.resumed} resumed")
    return 0


def run_read(args: argparse.Namespace) -> int:
    """``attn-gui lens read``: two grids, layer by position, each cell the top tokens and their p."""
    from ..engine import AttentionConfig
    from ..engine.analysis.lens.artifact import load
    from ..engine.analysis.lens.readout import read_lens

    if not 1 <= args.top_k <= 10:
        raise UsageError(f"attn-gui lens read: --top-k must be 1 to 10, not {args.top_k}")
    if not args.sentence.strip():
        raise UsageError("attn-gui lens read: --sentence is empty")
    lens = load(args.lens)
    r = read_lens(AttentionConfig(model=args.model, sentence=args.sentence, device=args.device), lens, args.top_k)
    for title, tokens, probs in (("logit lens", r.logit_tokens, r.logit_probs),
                                 ("Jacobian lens", r.jacobian_tokens, r.jacobian_probs)):
        print(f"{title} (layer: the top {args.top_k} at each position, with p)")
        print("position  " + "  ".join(f"{i}:{one_line(t)!r}" for i, t in enumerate(r.tokens)))
        for row, layer in enumerate(r.layers):
            cells = ["  ".join(f"{one_line(t)!r} {p:.3f}" for t, p in zip(tokens[row][i], probs[row, i].tolist(),
                                                                           strict=True))
                     for i in range(len(r.tokens))]
            print(f"L{layer:<3}      " + " | ".join(cells))
        print()
    return 0


def _unused(args: argparse.Namespace) -> int:  # the subcommand's own run is set by its parser
    raise UsageError("attn-gui lens: give fit or read")


COMMAND = Command("lens", "the Jacobian lens: fit one over a corpus (lens fit), read a sentence through it beside the "
                          "logit lens (lens read)", add_arguments, _unused)
