"""``attn-gui bench --heavy``: the models people run, at their size (issue 46).

Three files shaped as Llama-3-8B (``models8b``): a Q4_0 GGUF and a Q4_K_M GGUF as llama-quantize lays
them out (4.7 and 4.9 GB), and a bfloat16 folder (16 GB). Each is opened in a fresh subprocess with an
empty cache (the first open builds the tokenizer) and computed with dtype bfloat16 (the weight matmuls
in bfloat16 on the stored weights: PyTorch's int4 kernel for the 4-bit blocks; ``sources/packed.py``)
as the window asks for it: layer 16 of a 46-token sentence, its first maps (``compute(first=True)``:
the 16 layers before it, the open included), then the rest of that run (the other layers, the next
tokens), then a second sentence's first maps and its rest, and a switch to layer 5 inside what has
run. One more subprocess times the Q4_0 file's first maps in float32 (every matrix dequantized as it
is read), the exact path, for reference.

Reported for each: the wall time, the process's CPU time (on a quiet 2-core machine the wall time is
about half of it: the kernels run on 2 threads), the load average before and after (this machine is
shared: a load of 8 on 2 cores makes every wall time 3 to 4 times longer), and the peak RSS over the
interpreter's own against the target: the file's size + 1.5 GiB (the folder: under 20 GB). Targets:
first maps within 30 s, a second sentence within 10 s.

The files are written into ``$ATTN_GUI_HEAVY_DIR`` and kept there for the next run (writing them takes
minutes), else into a temporary folder removed after; a run with less free disk than they need skips
them, the folder also when less memory than it is available (``stored.check_memory`` refuses it).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from .settings import BenchSettings
from .timing import Log, Row, last_error_line, run_python

HEAVY_ENV = "ATTN_GUI_HEAVY_DIR"
T, LAYER, SWITCH = 46, 16, 5
OVER_FILE = 1.5 * 2**30  # bytes of peak RSS over the interpreter's, above the file's size
FOLDER_PEAK = 20e9  # bytes of peak RSS, the folder's
FIRST_S, SECOND_S = 30.0, 10.0  # the targets
FILES = {"Q4_0": "llama3-8b-Q4_0.gguf", "Q4_K_M": "llama3-8b-Q4_K_M.gguf", "bf16": "llama3-8b-bf16"}


def heavy_child(path: str, dtype: str, rest: bool = True) -> dict:
    """Body of a subprocess: the first maps of layer ``LAYER`` (the open included), the rest of that run, a second
    sentence's first maps and rest, a switch to layer ``SWITCH``; each with its wall and CPU time, the load average
    and the peak RSS so far."""
    import time

    import gguf.quants  # noqa: F401  (the libraries a model needs: the interpreter's share, not the model's)
    import tokenizers  # noqa: F401
    import torch  # noqa: F401

    from ..engine import AttentionConfig, compute
    from .memory import peak_rss_kib
    from .models8b import sentence

    base = peak_rss_kib()
    words = sentence(T).split()
    first_text = " ".join(words if path.endswith(".gguf") else [*words, "days"])  # the folder's vocabulary: no BOS
    texts = [first_text, " ".join(reversed(first_text.split()))]
    steps: list[dict] = []

    def step(name: str, text: str, layer: int, first: bool) -> None:
        load = os.getloadavg()
        wall, cpu = time.perf_counter(), time.process_time()
        result = compute(AttentionConfig(sentence=text, model=path, layer=layer, dtype=dtype), first=first)
        steps.append({"name": name, "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                      "load": [round(x, 2) for x in (*load, *os.getloadavg())], "peak_kib": peak_rss_kib(),
                      "tokens": len(result.tokens), "pending": result.model_run.pending
                      if result.model_run is not None else None})

    step("first maps, the open included", texts[0], LAYER, True)
    if rest:
        step("the rest of the run (other layers, next tokens)", texts[0], LAYER, False)
        step("second sentence: first maps", texts[1], LAYER, True)
        step("second sentence: the rest", texts[1], LAYER, False)
        step(f"switch to layer {SWITCH + 1} (inside what has run)", texts[1], SWITCH, True)
    return {"base_kib": base, "steps": steps}


def _write(folder: Path, name: str, log: Log) -> Path:
    """The file ``name`` of ``FILES`` in ``folder``, written where it is missing."""
    from .models8b import write_folder, write_gguf

    path = folder / FILES[name]
    if not path.exists():
        log(f"heavy: writing {path} (minutes) ...")
        part = path.with_name(path.name + ".part")
        if name == "bf16":
            write_folder(part, log=log)
        else:
            write_gguf(part, name, log=log)
        part.rename(path)
    return path


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir()) if path.is_dir() else path.stat().st_size


def _child(path: Path, dtype: str, rest: bool) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="attn-gui-bench-cache-"))
    try:
        from ..engine.readers.cache import CACHE_ENV
        from .timing import child_env

        proc = run_python(f"import json; from attn_gui.bench.heavy import heavy_child; "
                          f"print(json.dumps(heavy_child({str(path)!r}, {dtype!r}, {rest!r})))",
                          env=child_env() | {CACHE_ENV: str(folder)})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"heavy subprocess failed: {last_error_line(proc)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _rows(name: str, dtype: str, size: int, run: dict) -> list[Row]:
    label = f"Llama-3-8B shape, {name} ({size / 2**30:.2f} GiB), T={T}, {dtype}"
    rows = []
    for i, step in enumerate(run["steps"]):
        target = FIRST_S if i == 0 else SECOND_S if step["name"].startswith("second sentence: first") else None
        extra = {"cpu_s": round(step["cpu_s"], 1), "load_average_before_after": step["load"],
                 "tokens": step["tokens"], "layers_run": step["pending"]}
        rows.append(Row("heavy", f"layer {LAYER + 1}: {step['name']}", label, "ms", step["wall_s"] * 1e3,
                        target=None if target is None else target * 1e3,
                        met=None if target is None else step["wall_s"] <= target, extra=extra))
    peak = max(s["peak_kib"] for s in run["steps"]) * 1024
    over = peak - run["base_kib"] * 1024
    bound, what = (FOLDER_PEAK, "under 20 GB") if name == "bf16" else (size + OVER_FILE, "file + 1.5 GiB")
    rows.append(Row("heavy", f"peak RSS over the interpreter's (target: {what})", label, "MiB", over / 2**20,
                    target=bound / 2**20, met=over <= bound,
                    extra={"interpreter_mib": round(run["base_kib"] / 1024, 1), "file_mib": round(size / 2**20, 1)}))
    return rows


def bench_heavy(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """The 8 B files (tiny run: skipped, they take minutes to write and to run)."""
    import importlib.util

    from ..engine.readers.stored import free_bytes

    if settings.mode == "tiny":
        return [], [{"name": "heavy", "reason": "the 8 B files take minutes (a tiny run skips them)"}]
    if any(importlib.util.find_spec(m) is None for m in ("gguf", "safetensors", "tokenizers")):
        return [], [{"name": "heavy", "reason": "gguf, safetensors and tokenizers are needed"}]
    kept = os.environ.get(HEAVY_ENV)
    folder = Path(kept) if kept else Path(tempfile.mkdtemp(prefix="attn-gui-bench-heavy-"))
    folder.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    skipped: list[dict[str, str]] = []
    try:
        for name in ("Q4_0", "Q4_K_M", "bf16"):
            need = 17e9 if name == "bf16" else 5e9
            if not (folder / FILES[name]).exists() and shutil.disk_usage(folder).free < need + 1e9:
                skipped.append({"name": f"heavy {name}", "reason": f"less than {need / 1e9 + 1:.0f} GB free on disk"})
                continue
            path = _write(folder, name, log)
            size = _size(path)
            free = free_bytes()
            if name == "bf16" and free is not None and free < size + 2**30:
                skipped.append({"name": "heavy bf16 folder", "reason": f"{free / 1e9:.1f} GB of memory available "
                                f"for a {size / 1e9:.1f} GB folder (refused, as it should be)"})
                continue
            log(f"heavy: {name}, layer {LAYER + 1} of a {T}-token sentence, bfloat16, fresh process ...")
            rows += _rows(name, "bfloat16", size, _child(path, "bfloat16", True))
            if name == "Q4_0":
                log("heavy: Q4_0 in float32 (every matrix dequantized as it is read), first maps ...")
                rows += _rows(name, "float32", size, _child(path, "float32", False))
        return rows, skipped
    finally:
        if not kept:
            shutil.rmtree(folder, ignore_errors=True)
