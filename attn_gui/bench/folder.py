"""A model folder of 0.5 B parameters against transformers: peak memory, load, forwards at T = 64 and 2,048.

The benchmark writes a random checkpoint shaped as Qwen2-0.5B (24 layers, 14 query heads over
2 K/V heads, d_model 896, a 151,936-token vocabulary tied to the output, bfloat16: 494 M
parameters, 0.99 GB on disk) into a temporary folder, one tensor at a time from a seeded
generator, with a small tokenizer. Fresh subprocesses open it in turn, interleaved: the app as
it runs (memory-mapped bfloat16, each weight upcast to float32 when first read and kept, as
the free memory allows), the app short of memory (``stored.KEEP_SHARE = 0``: each layer upcast
as it runs and dropped), transformers (float32, eager attention returning every layer's weights
as the app keeps them, the last token's logits only as the app computes them: the peer) and
transformers' default (sdpa, no attention weights returned: for reference). Each times its load,
with the longest gap of a thread ticking every 5 ms meanwhile (how long the load held the
interpreter lock: a GUI thread waits as long), a warm-up forward of 64 tokens, then forwards,
each in CPU time on one thread (on a shared machine the wall clock also counts the other
processes; it is kept beside). Targets: the app's forward at most the peer's at both lengths; its peak RSS over the
interpreter's own at most the size on disk plus the float32 weights kept (short of memory:
plus one float32 layer) plus 128 MiB of activations at T = 64.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch

from .settings import BenchSettings
from .timing import Log, Row, last_error_line, run_python

QWEN2_05B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, vocab_size=151936)
TINY = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1000)
ACTIVATIONS_MIB = 128  # allowed above the weights and one float32 layer at T = 64
T, T_LONG = 64, 2048
WORDS = [f"w{i}" for i in range(100)]


def write_bf16(path: Path, tensors: list[tuple[str, tuple[int, ...]]], weight, log=lambda message: None) -> None:
    """A safetensors file of ``tensors`` (name, shape) in bfloat16, ``weight(name, shape)`` giving each, written by
    hand tensor by tensor (header: names, dtypes, shapes and byte offsets, padded to 8 bytes), so that the whole
    model is never in memory here."""
    header, offset = {}, 0
    for name, shape in tensors:
        n = 2 * int(torch.Size(shape).numel())
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        for i, (name, shape) in enumerate(tensors):
            f.write(weight(name, shape).to(torch.bfloat16).view(torch.int16).numpy().tobytes())
            if i % 36 == 0:
                log(f"{path.parent.name}: {i + 1} of {len(tensors)} tensors written")


def qwen2_tensors(sizes: dict) -> list[tuple[str, tuple[int, ...]]]:
    """Every tensor name and shape of a Qwen2 checkpoint of ``sizes`` (tied output: no lm_head)."""
    d, f, v = sizes["hidden_size"], sizes["intermediate_size"], sizes["vocab_size"]
    d_kv = d // sizes["num_attention_heads"] * sizes["num_key_value_heads"]
    out = [("model.embed_tokens.weight", (v, d)), ("model.norm.weight", (d,))]
    for i in range(sizes["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (d,)), (p + "post_attention_layernorm.weight", (d,)),
                (p + "self_attn.q_proj.weight", (d, d)), (p + "self_attn.q_proj.bias", (d,)),
                (p + "self_attn.k_proj.weight", (d_kv, d)), (p + "self_attn.k_proj.bias", (d_kv,)),
                (p + "self_attn.v_proj.weight", (d_kv, d)), (p + "self_attn.v_proj.bias", (d_kv,)),
                (p + "self_attn.o_proj.weight", (d, d)), (p + "mlp.gate_proj.weight", (f, d)),
                (p + "mlp.up_proj.weight", (f, d)), (p + "mlp.down_proj.weight", (d, f))]
    return out


def write_checkpoint(folder: Path, sizes: dict, seed: int = 0) -> int:
    """Write a random bfloat16 Qwen2 folder of ``sizes``; returns its weights' bytes on disk."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    write_bf16(folder / "model.safetensors", qwen2_tensors(sizes),
               lambda name, shape: torch.ones(shape) if name.endswith("norm.weight")
               else torch.randn(shape, generator=gen) * 0.02)
    config = dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], head_dim=sizes["hidden_size"] //
                  sizes["num_attention_heads"], hidden_act="silu", max_position_embeddings=32768, rms_norm_eps=1e-6,
                  rope_theta=1e6, tie_word_embeddings=True, torch_dtype="bfloat16", bos_token_id=0, eos_token_id=1,
                  use_sliding_window=False, **sizes)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return (folder / "model.safetensors").stat().st_size


def _ticking(ticks: list[float], stop):
    """Append the time every 5 ms until ``stop`` is set: the longest gap is the longest the lock was held."""
    import time

    while not stop.is_set():
        ticks.append(time.perf_counter())
        time.sleep(0.005)


def longest_gap_ms(work) -> tuple[float, float]:
    """Run ``work()`` while another thread ticks every 5 ms: (its wall ms, the longest gap between ticks, ms).

    A GUI thread waits as long for the interpreter lock as the ticking thread does."""
    import threading
    import time

    ticks: list[float] = []
    stop = threading.Event()
    ticker = threading.Thread(target=_ticking, args=(ticks, stop), daemon=True)
    ticker.start()
    start = time.perf_counter()
    work()
    wall = time.perf_counter() - start
    stop.set()
    ticker.join()
    ticks.append(time.perf_counter())
    return wall * 1e3, max(b - a for a, b in zip(ticks, ticks[1:], strict=False)) * 1e3


WARM = 64  # the warm-up forward's tokens (weights converted, pages read); the timed forwards follow
THREADS = 1  # every child computes on one thread: its CPU time is then the work, not threads waiting


def _forwards(run, lengths: dict[int, int]) -> dict[str, dict[str, list[float]]]:
    """``run(ids)`` once at ``WARM`` tokens (or the shortest length, if shorter), then timed at each of
    ``lengths`` (T: repeats): {"cpu": CPU ms per forward by T, "wall": wall ms}. What a forward returns
    is held until both clocks stop, so freeing it is not timed."""
    import time

    run(torch.arange(min(WARM, *lengths)) % len(WORDS))
    times: dict[str, dict[str, list[float]]] = {"cpu": {}, "wall": {}}
    for T, repeats in lengths.items():
        ids = torch.arange(T) % len(WORDS)
        times["cpu"][str(T)], times["wall"][str(T)] = [], []
        for _ in range(repeats):
            cpu, wall = time.process_time(), time.perf_counter()
            out = run(ids)
            times["cpu"][str(T)].append((time.process_time() - cpu) * 1e3)
            times["wall"][str(T)].append((time.perf_counter() - wall) * 1e3)
            del out
    return times


def app_child(path: str, lengths: dict[int, int], keep: bool = True) -> dict:
    """Body of the app's subprocess: the load (and its longest lock hold), forwards of each length
    ``lengths`` (T: repeats) on ``THREADS`` threads, the peak RSS (KiB). ``keep=False``: the weights
    upcast per layer (as when the free memory is short)."""
    from ..engine import AttentionConfig
    from ..engine.model.registry import source
    from ..engine.readers import stored
    from ..engine.model.decoder.source import load_model
    from ..engine.readers.hf.weights import weight_files
    from .memory import peak_rss_kib

    torch.set_num_threads(THREADS)
    if not keep:
        stored.KEEP_SHARE = 0.0
    base = peak_rss_kib()
    load_ms, stall_ms = longest_gap_ms(lambda: (AttentionConfig(model=path), load_model(path)))
    model = source(path)
    times = _forwards(lambda ids: model.forward(ids, "cpu", torch.float32), lengths)
    disk, layer = stored.need_bytes(weight_files(Path(path)))
    return {"base_kib": base, "peak_rss_kib": peak_rss_kib(), "load_ms": load_ms, "load_stall_ms": stall_ms,
            "forward_ms": times["cpu"], "forward_wall_ms": times["wall"], "disk_bytes": disk, "layer_bytes": layer,
            "f32_bytes": 4 * sum(t.numel() for t in load_model(path).weights.values())}


def transformers_child(path: str, lengths: dict[int, int], attn: str = "eager") -> dict:
    """The same with transformers: from_pretrained in float32, the logits of the last token only
    (``logits_to_keep=1``), as the app computes them; ``attn`` "eager" returns every layer's attention
    weights, as the app keeps them, "sdpa" (transformers' default) returns none."""
    import transformers

    from .memory import peak_rss_kib

    torch.set_num_threads(THREADS)
    torch.set_grad_enabled(False)
    base = peak_rss_kib()
    holder = {}

    def load():
        holder["model"] = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.float32, attn_implementation=attn).eval()

    load_ms, stall_ms = longest_gap_ms(load)
    model, attentions = holder["model"], attn == "eager"
    times = _forwards(lambda ids: model(ids[None], output_attentions=attentions, logits_to_keep=1), lengths)
    return {"base_kib": base, "peak_rss_kib": peak_rss_kib(), "load_ms": load_ms, "load_stall_ms": stall_ms,
            "forward_ms": times["cpu"], "forward_wall_ms": times["wall"]}


def _child(kind: str, path: str, lengths: dict[int, int], option) -> dict:
    code = (f"import json; from attn_gui.bench.folder import {kind}_child; "
            f"print(json.dumps({kind}_child({path!r}, {dict(lengths)!r}, {option!r})))")
    proc = run_python(code)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} subprocess failed: {last_error_line(proc)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


PEER, SDPA = "transformers", "transformers, sdpa"
RUNS = {"app": ("app", True), "app, per-layer upcast": ("app", False),  # the app keeping float32, short of memory
        PEER: ("transformers", "eager"), SDPA: ("transformers", "sdpa")}  # the peer, and transformers' default


def _interleaved(path: str, lengths: dict[int, int], rounds: int, runs=tuple(RUNS)) -> dict[str, list[dict]]:
    """Each of ``runs`` in a fresh subprocess, in turn, ``rounds`` times: their results by run."""
    out: dict[str, list[dict]] = {run: [] for run in runs}
    for _ in range(rounds):
        for run in runs:
            kind, option = RUNS[run]
            out[run].append(_child(kind, path, lengths, option))
    return out


def bench_folder(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """The 0.5 B folder (tiny run: a 2-layer one) through the app and transformers, interleaved: peak RSS,
    load and its longest lock hold, forwards at T = 64 and 2,048 (tiny: 8 and 32, in the same subprocesses)."""
    import importlib.util

    from .timing import Timing

    if any(importlib.util.find_spec(m) is None for m in ("safetensors", "tokenizers", "transformers")):
        return [], [{"name": "model folder", "reason": "safetensors, tokenizers and transformers are needed"}]
    tiny = settings.mode == "tiny"
    sizes, label = (TINY, "Qwen2, 2 layers, d 64, bf16") if tiny else (QWEN2_05B, "Qwen2-0.5B shape, bf16")
    short, long = (8, 32) if tiny else (T, T_LONG)
    folder = Path(tempfile.mkdtemp(prefix="attn-gui-bench-"))
    rows = []
    try:
        log(f"model folder: writing a random {label} checkpoint ...")
        write_checkpoint(folder / "qwen2", sizes)
        path = str(folder / "qwen2")
        log(f"model folder: the app and transformers, load and forwards at T={short}, interleaved ...")
        lengths = {short: 1, long: 1} if tiny else {short: 3}
        load = os.getloadavg()
        runs = _interleaved(path, lengths, 2 if settings.mode == "quick" else 3 if settings.mode == "full" else 1)
        app = runs["app"][0]
        size = f"{label}, T={short}"
        facts = dict(disk_mib=round(app["disk_bytes"] / 2**20, 1), layer_f32_mib=round(app["layer_bytes"] / 2**20, 1),
                     f32_mib=round(app["f32_bytes"] / 2**20, 1), interpreter_mib=round(app["base_kib"] / 1024, 1))
        bounds = {"app": (app["disk_bytes"] + app["f32_bytes"]) / 2**20 + ACTIVATIONS_MIB,
                  "app, per-layer upcast": (app["disk_bytes"] + app["layer_bytes"]) / 2**20 + ACTIVATIONS_MIB}
        for run, results in runs.items():
            peak = max((r["peak_rss_kib"] - r["base_kib"]) / 1024 for r in results)
            bound = bounds.get(run)
            rows.append(Row("model folder", f"{run}: peak RSS over the interpreter's", size, "MiB", peak,
                            target=bound, met=None if bound is None else peak <= bound, extra=facts))
        for run in ("app", PEER):
            rows.append(Row.timed("model folder", f"{run}: load", size, Timing([r["load_ms"] for r in runs[run]])))
        rows.append(Row.timed("model folder", "app: longest lock hold while loading (5 ms ticks)", size,
                              Timing([r["load_stall_ms"] for r in runs["app"]])))
        rows += _forward_rows(runs, short, f"{label}, T={short}", (*load, *os.getloadavg()))
        if not tiny:
            log(f"model folder: forwards at T={long}, interleaved ...")
            load = os.getloadavg()
            runs = _interleaved(path, {long: 1}, 3 if settings.mode == "full" else 2, runs=("app", PEER, SDPA))
        rows += _forward_rows(runs, long, f"{label}, T={long}", (*load, *os.getloadavg()))
        return rows, []
    finally:
        shutil.rmtree(folder, ignore_errors=True)


FORWARD = f"forward, CPU time on {THREADS} thread{'s' if THREADS > 1 else ''}"
PEER_NAME = f"{PEER}: {FORWARD} (eager, every layer's attentions, last logits)"
SDPA_NAME = f"{SDPA}: {FORWARD} (no attentions, last logits)"


def _forward_rows(runs: dict[str, list[dict]], T: int, size: str, load: tuple[float, ...]) -> list[Row]:
    """A forward's CPU time for each run, each of the app's over transformers' eager one, which returns every
    layer's attention as the app keeps it (target: at most 1), and over transformers' default (sdpa, none)."""
    from .timing import Timing

    timings = {run: Timing([ms for r in results for ms in r["forward_ms"][str(T)]]) for run, results in runs.items()}
    walls = {run: [round(ms) for r in results for ms in r["forward_wall_ms"][str(T)]] for run, results in runs.items()}
    extra = lambda run: {"wall_ms": walls[run], "load_average_before_after": [round(x, 2) for x in load]}  # noqa: E731
    peer, sdpa = timings[PEER], timings.get(SDPA)
    rows = []
    for run, timing in timings.items():
        if run in (PEER, SDPA):
            continue
        ratio = timing.median_ms / peer.median_ms
        over_sdpa = {} if sdpa is None else {"over_sdpa": round(timing.median_ms / sdpa.median_ms, 3)}
        rows.append(Row.timed("model folder", f"{run}: {FORWARD} (every layer's α kept)", size, timing,
                              ratio=ratio, ratio_to=PEER_NAME, target=1.0, met=ratio <= 1.0,
                              extra=extra(run) | over_sdpa))
    rows.append(Row.timed("model folder", PEER_NAME, size, peer, extra=extra(PEER)))
    if sdpa is not None:
        rows.append(Row.timed("model folder", SDPA_NAME, size, sdpa, extra=extra(SDPA)))
    return rows
