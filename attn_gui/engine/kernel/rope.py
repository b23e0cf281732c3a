"""RoPE: the angle of each dimension pair at each position (``rope_theta``, cached with cos and sin as
``rope_tables``) and ``rotate``; and scaled RoPE: the inverse frequencies of Llama 3.1, linear, dynamic
(NTK), YaRN and LongRoPE scalings, and llama.cpp's frequency factors (``freq_factors``: the divisor of each
pair's frequency, which a GGUF of Llama 3.1 stores as the tensor rope_freqs).

Each is computed as transformers' ``modeling_rope_utils`` computes it (``_compute_llama3_parameters``
…), in float32, for a model that reads at most its ``max_position_embeddings`` tokens (LongRoPE:
at most ``original_max_position_embeddings``, so its short factors hold). Each returns the
inverse frequency of every pair (d_k/2,) and the attention factor transformers multiplies cos and
sin by (YaRN's and LongRoPE's; 1 for the others), which scales q and k after the rotation.

``scaling`` is the model's ``rope_parameters`` as sorted (key, value) pairs (hashable: the tables
are cached), lists as tuples.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import torch

KINDS = ("linear", "dynamic", "yarn", "longrope", "llama3", "freq_factors")


def plain_inv_freq(d_k: int, base: float) -> torch.Tensor:
    """base^(−2i/d_k) for i = 0 … d_k/2 − 1, in float32 as transformers computes it.  (d_k/2,)"""
    return 1.0 / (base ** (torch.arange(0, d_k, 2, dtype=torch.int64).to(dtype=torch.float) / d_k))


def inv_freq(d_k: int, base: float, scaling: tuple[tuple[str, object], ...],
             seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    """The scaled inverse frequencies (d_k/2,) float32 and the attention factor of ``scaling``; ``seq_len``, the
    positions the run reaches (LongRoPE's long factors beyond the original length; None: within it)."""
    p: dict[str, Any] = dict(scaling)  # numbers and lists, checked where the config is read
    kind = p["rope_type"]
    plain = plain_inv_freq(d_k, base)
    if kind == "dynamic":  # base · (factor · T / max_T − factor + 1)^(d/(d−2)) only once T > max_T: never here
        return plain, 1.0
    if kind == "linear":  # positions divided by factor: the same as every frequency divided by it
        return plain / p["factor"], 1.0
    if kind == "llama3":
        return _llama3(plain, p), 1.0
    if kind == "freq_factors":  # each frequency divided by its own factor: Llama 3.1's, as a GGUF stores them
        return plain / torch.tensor(p["freq_factors"], dtype=torch.float32), 1.0
    if kind == "yarn":
        return _yarn(d_k, base, p)
    if kind == "longrope":
        return _longrope(d_k, base, p, seq_len)
    raise ValueError(f"unknown RoPE scaling {kind!r}")


def _llama3(plain: torch.Tensor, p: dict) -> torch.Tensor:
    """Llama 3.1: long wavelengths divided by factor, short ones kept, those between blended smoothly."""
    factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
    old = p["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / plain
    scaled = torch.where(wavelen > low_wavelen, plain / factor, plain)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def _mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn(dim: int, base: float, p: dict) -> tuple[torch.Tensor, float]:
    """YaRN: frequencies blended between interpolated (÷ factor) and kept by a ramp over the pairs,
    and cos and sin scaled by 0.1 ln(factor) + 1."""
    old = p["original_max_position_embeddings"]
    factor = p.get("factor") or p["max_position_embeddings"] / old
    attention_factor = p.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = p.get("mscale"), p.get("mscale_all_dim")
        attention_factor = float(_mscale(factor, mscale) / _mscale(factor, mscale_all_dim)) \
            if mscale and mscale_all_dim else _mscale(factor)
    beta_fast, beta_slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(old / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as transformers: no division by zero
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    keep = 1 - ramp
    return interpolation * (1 - keep) + extrapolation * keep, attention_factor


def _longrope(dim: int, base: float, p: dict, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    """LongRoPE (Phi-3): each frequency divided by its own factor, the short factors while the run's positions stay
    within the original length, the long ones where they go beyond it (transformers' ``longrope_frequency_update``:
    every position of that run); cos and sin scaled by √(1 + ln(factor) / ln(original length))."""
    old = p["original_max_position_embeddings"]
    factor = p.get("factor") or p["max_position_embeddings"] / old
    attention_factor = p.get("attention_factor")
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(old))
    long = seq_len is not None and seq_len > old
    ext = torch.tensor(p["long_factor" if long else "short_factor"], dtype=torch.float32)
    shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    return 1.0 / (ext * base**shape), attention_factor


def rope_theta(T: int, d_k: int, base: float, dtype=torch.float32, device=None, offset: int = 0) -> torch.Tensor:
    """RoPE's angle of each dimension pair at each position: theta[t, i] = p * base^(-2i/d_k),
    p = offset + t. (T, d_k/2), computed in ``dtype`` (Llama's ``inv_freq`` times the position)."""
    inv_freq = 1.0 / base ** (torch.arange(0, d_k, 2, dtype=dtype, device=device) / d_k)  # (d_k/2,)
    return torch.arange(offset, offset + T, dtype=dtype, device=device).unsqueeze(1) * inv_freq  # (T, d_k/2)


def scaled_rope_theta(T: int, d_k: int, base: float, scaling: tuple, dtype=torch.float32, device=None,
                      offset: int = 0) -> tuple[torch.Tensor, float]:
    """The angles of a scaled RoPE (``inv_freq``: Llama 3.1, YaRN …) at positions offset ...
    offset + T − 1, computed in float32 as transformers computes them, in ``dtype``; and the attention factor
    cos and sin are multiplied by.  (T, d_k/2)"""
    frequencies, factor = inv_freq(d_k, base, scaling, offset + T)  # (d_k/2,)
    positions = torch.arange(offset, offset + T, dtype=torch.float32).unsqueeze(1)  # (T, 1)
    return (positions * frequencies).to(dtype=dtype, device=device), factor


@lru_cache(maxsize=32)
def rope_tables(T: int, d_k: int, base: float, dtype=torch.float32, device=None, offset: int = 0,
                scaling: tuple = ()):
    """``rope_theta`` and its ``rope_cos_sin``, (T, d_k/2), (T, d_k), (T, d_k): computed once per
    sizes, base, dtype, device, offset and scaling (a training step asks for the same every layer and step).
    A scaled RoPE's cos and sin are multiplied by its attention factor (YaRN's, LongRoPE's).

    The same values as computing them afresh; shared, so read-only. Made outside autograd
    and inference mode, so any later computation may use them.
    """
    with torch.inference_mode(False), torch.no_grad():
        if not scaling:
            theta = rope_theta(T, d_k, base, dtype, device, offset)
            return (theta, *rope_cos_sin(theta))
        theta, factor = scaled_rope_theta(T, d_k, base, scaling, dtype, device, offset)
        return (theta, *(t * factor if factor != 1.0 else t for t in rope_cos_sin(theta)))


def rope_cos_sin(theta: torch.Tensor):
    """cos and sin (T, d_k) of the angles ``theta`` (T, d_k/2), each frequency twice (Llama's layout):
    dimensions i and i + d_k/2 form pair i."""
    angles = torch.cat([theta, theta], dim=-1)  # (T, d_k)
    return angles.cos(), angles.sin()


def rope_angles(T: int, d_k: int, base: float, dtype=torch.float32, device=None, offset: int = 0,
                start: int = 0):
    """cos and sin (T, d_k) of RoPE's angles at positions offset + start ... offset + start + T - 1.

    ``offset`` is where the sentence starts (the shift demonstration), ``start`` the length
    of a key/value cache before these tokens; only their sum matters.
    """
    return rope_cos_sin(rope_theta(T, d_k, base, dtype, device, offset + start))


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x_i, x_{i + r/2}) by its angle: x cos + rotate_half(x) sin.  (..., T, d)

    r is the width of ``cos`` (T, r): where r < d (partial rotary) the last d - r dimensions pass unrotated."""
    r = cos.size(-1)
    if r < x.size(-1):
        return torch.cat([rotate(x[..., :r], cos, sin), x[..., r:]], dim=-1)
    half = x.size(-1) // 2
    rotated_half = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # rotate_half: (-x2, x1)
    return x * cos + rotated_half * sin
