"""What a compute allocates, counted before anything is: ``estimate_bytes``, and the streamed block's size."""

from __future__ import annotations


import torch

from ..config.config import AttentionConfig
from ..model.plan import Plan, plan
from ..base.devices import free_bytes
from .inputs import source_tokens_for, tokens_for
from ..kernel.summaries import TOP_K, decay_edges


# Below this estimate the free memory is not read: a compute this small always fits.
CHECK_FREE_ABOVE = 256 * 2**20


def estimate_bytes(config: AttentionConfig, display_max: int | None = None, resolved: Plan | None = None) -> int:
    """Peak bytes the compute allocates on its device, counted before anything is allocated.

    ``display_max``: as ``compute`` streams the T x T fields when T exceeds it; ``resolved``: the config's plan
    where the caller has it (else it is made here).
    """
    p = plan(config) if resolved is None else resolved
    toks = tokens_for(config, p)
    source = source_tokens_for(config)
    T, V = len(toks.tokens), len(toks.vocab)
    T_k = T if source is None else len(source.tokens)  # keys
    h, d, d_k, d_v = p.dims.heads, p.dims.d_model, p.dims.d_k, p.dims.d_v
    elem = 8 if config.dtype == "float64" else 4
    reduce_to = p.reduce_to(T, display_max)
    if reduce_to is not None:
        # a GPU's block shrinks to what is free (see _block_bytes): count its smallest
        block = BLOCK_BYTES["cpu"] if config.device == "cpu" else MIN_GPU_BLOCK
        n = 3 * h * reduce_to**2 + 10 * block // elem  # the pooled maps; one block's fields and temporaries
    else:
        n = 4 * h * T * T_k  # scores, scaled, weights, and one softmax temporary
    if p.spec is not None:
        n += _model_bytes(p, T, reduce_to, elem) // elem
    n += (T + T_k) * d * 3 + h * (T + T_k) * (d_k + d_v) + T * h * d_v
    n += h * d * (2 * d_k + d_v) + h * d_v * d + (V + T_k) * d
    if p.shown.alibi and reduce_to is None:
        n += h * T * T_k  # the position bias
    return n * elem


def _model_bytes(p: Plan, T: int, reduce_to: int | None, elem: int) -> int:
    """What a model run keeps beyond the shown layer's fields: every layer's X, keys and values, its
    summaries, and either every layer's T x T alpha or (streamed) its maps pooled to ``reduce_to``."""
    spec = p.spec
    assert spec is not None  # model mode
    L, h, g, d, d_k = spec.layers, spec.heads, spec.kv_heads or spec.heads, spec.d_model, spec.d_k
    n = L * T * d + 2 * L * g * T * d_k + 16 * T * d  # X per layer, the cache, one layer's activations
    n += L * h * (2 * T + 2 * T * TOP_K + len(decay_edges(T)))  # the summaries
    n += L * h * (reduce_to**2 if reduce_to is not None else T * T)  # every layer's alpha, pooled or whole
    if reduce_to is None:
        n += 2 * h * T * T  # a layer's scores and scaled before their softmax
    return n * elem


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


# Scores of every head for one block of query rows, when streamed: small blocks stay in a
# CPU's caches; a GPU wants few, large launches: up to 512 MiB, a sixteenth of its free memory.
# A block's temporaries are about ten times its size: 4 GiB blocks held 20.5 GiB for SmolLM2 at
# T = 4,096 on an H200 and 512 MiB blocks 5.5 GiB, at 1.16x the time (docs/benchmarks.md, CUDA long inputs).
BLOCK_BYTES = {"cpu": 8 * 2**20, "cuda": 512 * 2**20, "mps": 256 * 2**20}
MIN_GPU_BLOCK = 64 * 2**20


def _block_bytes(device: torch.device) -> int:
    if device.type == "cpu":
        return BLOCK_BYTES["cpu"]
    free = free_bytes(device)
    return BLOCK_BYTES[device.type] if free is None else max(MIN_GPU_BLOCK, min(BLOCK_BYTES[device.type], free // 16))
