"""A model folder of 0.5 B parameters: peak memory, load and a forward at T = 64, against transformers.

The benchmark writes a random checkpoint shaped as Qwen2-0.5B (24 layers, 14 query heads over
2 K/V heads, d_model 896, a 151,936-token vocabulary tied to the output, bfloat16: 494 M
parameters, 0.99 GB on disk) into a temporary folder, one tensor at a time from a seeded
generator, with a small tokenizer. A fresh subprocess opens it as the app does (memory-mapped
bfloat16, each layer upcast to float32 as it runs), times the load and a forward of 64 tokens,
and reports its peak resident set; another does the same with transformers (float32, eager
attention returning every layer's weights, as the app keeps them) where it is installed.
The target: the app's peak, over the interpreter's own, at most the size on disk plus one
layer in float32 plus activations (allowed 128 MiB at T = 64).
"""

from __future__ import annotations

import json
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
T = 64
WORDS = [f"w{i}" for i in range(100)]


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
    """Write a random bfloat16 Qwen2 folder of ``sizes``; returns its weights' bytes on disk.

    The safetensors file is written by hand, tensor by tensor (header: names, dtypes, shapes
    and byte offsets, padded to 8 bytes), so that the whole model is never in memory here.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder.mkdir(parents=True, exist_ok=True)
    tensors = qwen2_tensors(sizes)
    header, offset = {}, 0
    for name, shape in tensors:
        n = 2 * int(torch.Size(shape).numel())
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    gen = torch.Generator().manual_seed(seed)
    with open(folder / "model.safetensors", "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        for name, shape in tensors:
            w = torch.ones(shape) if name.endswith("norm.weight") else torch.randn(shape, generator=gen) * 0.02
            f.write(w.to(torch.bfloat16).view(torch.int16).numpy().tobytes())
    config = dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], head_dim=sizes["hidden_size"] //
                  sizes["num_attention_heads"], hidden_act="silu", max_position_embeddings=32768, rms_norm_eps=1e-6,
                  rope_theta=1e6, tie_word_embeddings=True, torch_dtype="bfloat16", bos_token_id=0, eos_token_id=1,
                  use_sliding_window=False, **sizes)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return (folder / "model.safetensors").stat().st_size


def app_child(path: str, repeats: int) -> dict:
    """Body of the app's subprocess: the load, ``repeats`` forwards of T tokens, the peak RSS (KiB)."""
    import time

    from ..engine import AttentionConfig, source
    from ..engine.sources.decoder import load_model
    from ..engine.sources.stored import need_bytes
    from ..engine.sources.hf import weight_files
    from .memory import peak_rss_kib

    base = peak_rss_kib()
    start = time.perf_counter()
    AttentionConfig(model=path)
    load_model(path)
    load_ms = (time.perf_counter() - start) * 1e3
    model = source(path)
    ids = torch.tensor(model.tokenize(" ".join(WORDS[:T])).token_ids)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.forward(ids, "cpu", torch.float32)
        times.append((time.perf_counter() - start) * 1e3)
    disk, layer = need_bytes(weight_files(Path(path)))
    return {"base_kib": base, "peak_rss_kib": peak_rss_kib(), "load_ms": load_ms, "forward_ms": times,
            "disk_bytes": disk, "layer_bytes": layer, "tokens": len(ids)}


def transformers_child(path: str, repeats: int) -> dict:
    """The same with transformers: from_pretrained in float32, eager attention returning every layer's weights."""
    import time

    import transformers

    from .memory import peak_rss_kib

    torch.set_grad_enabled(False)
    base = peak_rss_kib()
    start = time.perf_counter()
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                              attn_implementation="eager").eval()
    load_ms = (time.perf_counter() - start) * 1e3
    ids = torch.arange(T)[None] % len(WORDS)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model(ids, output_attentions=True)
        times.append((time.perf_counter() - start) * 1e3)
    return {"base_kib": base, "peak_rss_kib": peak_rss_kib(), "load_ms": load_ms, "forward_ms": times}


def _child(kind: str, path: str, repeats: int) -> dict:
    code = (f"import json; from attn_gui.bench.folder import {kind}_child; "
            f"print(json.dumps({kind}_child({path!r}, {int(repeats)})))")
    proc = run_python(code)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} subprocess failed: {last_error_line(proc)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_folder(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """The 0.5 B folder (tiny run: a 2-layer one) through the app and through transformers."""
    import importlib.util

    from .timing import Timing

    if any(importlib.util.find_spec(m) is None for m in ("safetensors", "tokenizers")):
        return [], [{"name": "model folder", "reason": "safetensors and tokenizers are not installed"}]
    tiny = settings.mode == "tiny"
    sizes, label = (TINY, "Qwen2, 2 layers, d 64, bf16") if tiny else (QWEN2_05B, "Qwen2-0.5B shape, bf16")
    repeats = 1 if tiny else 3
    folder = Path(tempfile.mkdtemp(prefix="attn-gui-bench-"))
    rows, skipped = [], []
    try:
        log(f"model folder: writing a random {label} checkpoint ...")
        write_checkpoint(folder / "qwen2", sizes)
        path = str(folder / "qwen2")
        log("model folder: the app's load and forward ...")
        app = _child("app", path, repeats)
        peak = (app["peak_rss_kib"] - app["base_kib"]) / 1024
        bound = (app["disk_bytes"] + app["layer_bytes"]) / 2**20 + ACTIVATIONS_MIB
        size = f"{label}, T={app['tokens']}"
        facts = dict(disk_mib=round(app["disk_bytes"] / 2**20, 1), layer_f32_mib=round(app["layer_bytes"] / 2**20, 1),
                     interpreter_mib=round(app["base_kib"] / 1024, 1))
        rows.append(Row("model folder", "app: peak RSS over the interpreter's", size, "MiB", peak, target=bound,
                        met=peak <= bound, extra=facts))
        rows.append(Row.timed("model folder", "app: load (config, mapped weights, tokenizer)", size,
                              Timing([app["load_ms"]])))
        forward = Timing(app["forward_ms"])
        rows.append(Row.timed("model folder", "app: forward (every layer's steps kept)", size, forward))
        if importlib.util.find_spec("transformers") is None:
            skipped.append({"name": "model folder, transformers", "reason": "transformers is not installed"})
            return rows, skipped
        log("model folder: transformers' load and forward ...")
        hf = _child("transformers", path, repeats)
        hf_forward = Timing(hf["forward_ms"])
        rows.append(Row("model folder", "transformers: peak RSS over the interpreter's", size, "MiB",
                        (hf["peak_rss_kib"] - hf["base_kib"]) / 1024))
        rows.append(Row.timed("model folder", "transformers: load (from_pretrained, float32)", size,
                              Timing([hf["load_ms"]])))
        rows.append(Row.timed("model folder", "transformers: forward (eager, output_attentions)", size, hf_forward))
        app_forward = rows[2]  # the app's forward over transformers' on the same folder
        app_forward.ratio, app_forward.ratio_to = forward.median_ms / hf_forward.median_ms, rows[-1].name
        return rows, skipped
    finally:
        shutil.rmtree(folder, ignore_errors=True)
