"""compute(config) -> AttentionResult: draw the inputs and weights, run every step, keep them all."""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from . import attention as A
from .attention import Projections
from .config import AttentionConfig
from .devices import free_bytes, resolve_device, synchronize
from .errors import DeviceError, TooLargeError
from .fields import FIELDS, TENSOR_FIELDS
from .reduce import reduce_matrix
from .inputs import check_tokens, tokens_for
from .sources import source
from .tokens import Tokens

DTYPES = {"float32": torch.float32, "float64": torch.float64}


# Attention keeps h T x T matrices. Past these lengths a CPU (or GPU) compute takes seconds
# and gigabytes per head, so the limit is stated instead of letting the machine thrash.
MAX_TOKENS = {"cpu": 8192, "cuda": 32768, "mps": 8192}


@dataclass(frozen=True)
class AttentionResult:
    """Every intermediate of one self-attention computation, named after the paper.

    Tensors live on ``device``; per-head fields keep their head axis even when h = 1.
    ``w_q``, ``w_k``, ``w_v`` and ``w_o`` are None when the config has no projections;
    ``b_q``, ``b_k``, ``b_v`` and ``b_o`` are None when there are no biases (random weights).
    """

    config: AttentionConfig
    tokens: tuple[str, ...]
    token_ids: torch.Tensor  # (T,)
    vocab: tuple[str, ...]
    x: torch.Tensor  # (T, d)
    w_q: torch.Tensor | None  # (h, d, d_k) row / (h, d_k, d) column
    w_k: torch.Tensor | None
    w_v: torch.Tensor | None  # (h, d, d_v) row / (h, d_v, d) column
    w_o: torch.Tensor | None  # (h*d_v, d) row / (d, h*d_v) column
    q: torch.Tensor  # (h, T, d_k)
    k: torch.Tensor  # (h, T, d_k)
    v: torch.Tensor  # (h, T, d_v)
    scores: torch.Tensor  # (h, T, T) omega
    scaled: torch.Tensor  # (h, T, T) omega / sqrt(d_k) / temperature, masked -inf
    weights: torch.Tensor  # (h, T, T) alpha
    head_outputs: torch.Tensor  # (h, T, d_v) z
    concat: torch.Tensor  # (T, h*d_v)
    output: torch.Tensor  # (T, d)
    elapsed_ms: float
    device: str
    notes: tuple[str, ...] = field(default=())
    layer_weights: torch.Tensor | None = None  # (layers, h, T, T): every layer's alpha, model mode only
    b_q: torch.Tensor | None = None  # (h, 1, d_k)
    b_k: torch.Tensor | None = None  # (h, 1, d_k)
    b_v: torch.Tensor | None = None  # (h, 1, d_v)
    b_o: torch.Tensor | None = None  # (1, d)

    @property
    def seq_len(self) -> int:
        return len(self.tokens)

    @property
    def heads(self) -> int:
        return self.q.shape[0]

    def fields(self) -> tuple[str, ...]:
        """Names of the tensor fields present in this result, in data-flow order."""
        return tuple(n for n in TENSOR_FIELDS if getattr(self, n) is not None)

    def numpy(self, name: str) -> np.ndarray:
        """The full field ``name`` as a host numpy array (copies from the device)."""
        return getattr(self, name).detach().cpu().numpy()

    def to_numpy(self) -> dict[str, np.ndarray]:
        """Every tensor field as a numpy array, plus ``token_ids``."""
        out = {n: self.numpy(n) for n in self.fields()}
        out["token_ids"] = self.token_ids.cpu().numpy()
        return out

    def display(self, name: str, max_rows: int = 512, max_cols: int = 512) -> np.ndarray:
        """Field ``name`` reduced on its device to at most max_rows x max_cols per matrix, as numpy."""
        t = getattr(self, name)
        return reduce_matrix(t, max_rows, max_cols, FIELDS[name].kind).detach().cpu().numpy()


def estimate_bytes(config: AttentionConfig) -> int:
    """Peak bytes the compute allocates on its device, counted before anything is allocated."""
    toks = tokens_for(config)
    T, V = len(toks.tokens), len(toks.vocab)
    dims = config.dims
    h, d, d_k, d_v = dims.heads, dims.d_model, dims.d_k, dims.d_v
    elem = 8 if config.dtype == "float64" else 4
    n = 4 * h * T * T  # scores, scaled, weights, and one softmax temporary
    n += T * d * 3 + h * T * (2 * d_k + 2 * d_v) + T * h * d_v
    n += h * d * (2 * d_k + d_v) + h * d_v * d + V * d
    return n * elem


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def draw_parameters(config: AttentionConfig, token_ids: tuple[int, ...], vocab_size: int):
    """X and the projections, drawn on the CPU in float32 from seeded generators.

    Order (so the tutorials' numbers come out): X (V x d table, or T x d uniform),
    then from the weight generator W_q, W_k, W_v, W_o. Returns float32 CPU tensors;
    the weights are shared with a small cache, so treat them as read-only.
    """
    rows = vocab_size if config.inputs == "embedding" else len(token_ids)
    size = config.heads * config.d_model * (2 * config.d_k + 2 * config.d_v)
    draw = _draw if size <= CACHE_MAX_WEIGHTS else _draw.__wrapped__  # big draws are not kept
    first, *weights = draw(rows, config.d_model, config.d_k, config.d_v, config.heads, config.seed,
                            config.weight_seed, config.inputs, config.projections, config.init, config.layout)
    if config.inputs == "embedding":
        x = first[torch.tensor(token_ids, dtype=torch.long)]  # rows of the table, by token id
    else:
        x = first.clone()
    return (x, *weights)


CACHE_MAX_WEIGHTS = 4_000_000  # 16 MB a set in float32; at most 4 sets are kept


@functools.lru_cache(maxsize=4)
def _draw(rows, d, d_k, d_v, h, seed, weight_seed, inputs, projections, init, layout):
    # Cached: typing changes the tokens far more often than the sizes or seeds, and drawing
    # a million weights costs milliseconds, more than the attention itself at small T.
    gen = torch.Generator().manual_seed(seed)
    if inputs == "embedding":
        first = torch.randn(rows, d, generator=gen)  # nn.Embedding's N(0, 1) init, V x d
    else:
        first = torch.rand(rows, d, generator=gen)  # one uniform row per position, T x d
    if not projections:
        return first, None, None, None, None
    wgen = gen if weight_seed is None else torch.Generator().manual_seed(weight_seed)

    def draw(shape: tuple[int, ...], fan_in: int) -> torch.Tensor:
        if init == "uniform":
            return torch.rand(shape, generator=wgen)
        return torch.randn(shape, generator=wgen) / math.sqrt(fan_in)

    col = layout == "column"
    w_q = draw((h, d_k, d) if col else (h, d, d_k), d)
    w_k = draw((h, d_k, d) if col else (h, d, d_k), d)
    w_v = draw((h, d_v, d) if col else (h, d, d_v), d)
    w_o = draw((d, h * d_v) if col else (h * d_v, d), h * d_v)
    return first, w_q, w_k, w_v, w_o


def compute(config: AttentionConfig) -> AttentionResult:
    """Run self-attention for ``config`` and return every intermediate.

    Raises
    ------
    ConfigError
        The sentence has no tokens, or more than the model reads.
    ModelUnavailable
        Model mode, and the model is not installed.
    DeviceError
        The device is absent, gone away or out of memory.
    TooLargeError
        The estimate exceeds the memory free on the device (checked before allocating).
    """
    device = resolve_device(config.device)
    toks = check_tokens(config)
    heads = config.dims.heads
    T, limit = len(toks.tokens), MAX_TOKENS[device.type]
    if T > limit:
        raise TooLargeError(f"T = {T:,} tokens is over the limit of {limit:,} on {device.type} "
                            f"(attention keeps {heads} × T × T weights)")
    need = estimate_bytes(config)
    free = free_bytes(device)
    if free is not None and need > 0.8 * free:
        raise TooLargeError(
            f"T = {T:,} with {heads} head(s) and these sizes needs about {_human(need)}; "
            f"{config.device} has {_human(free)} free"
        )
    try:
        return _compute(config, toks, device)
    except torch.cuda.OutOfMemoryError as exc:
        raise DeviceError(f"{config.device} ran out of memory ({_human(need)} needed)") from exc
    except MemoryError as exc:
        raise TooLargeError(f"out of memory: T = {T:,} with {heads} head(s) needs about {_human(need)}") from exc
    except RuntimeError as exc:
        if "DefaultCPUAllocator" in str(exc):  # torch's CPU allocator failed: say so with the estimate
            raise TooLargeError(f"out of memory: T = {T:,} with {heads} head(s) needs about {_human(need)}; "
                                f"the CPU could not allocate it") from exc
        if device.type != "cpu" and not isinstance(exc, DeviceError):
            raise DeviceError(f"{config.device} failed: {str(exc).splitlines()[0]}") from exc
        raise


def _compute(config: AttentionConfig, toks: Tokens, device: torch.device) -> AttentionResult:
    dtype = DTYPES[config.dtype]
    start = time.perf_counter()
    layer_weights = None
    if config.model is None:
        x, weights = _random_inputs(config, toks, device, dtype)
        notes = []
    else:
        x, weights, layer_weights = _model_inputs(config, toks, device, dtype)
        notes = ["output is the attention block's output, before the residual and LayerNorm"]
    steps = A.attend(x, weights, layout=config.layout, scale=config.scale, temperature=config.temperature,
                     causal=config.causal, similarity=config.similarity)
    if layer_weights is not None and (config.scale, config.temperature, config.causal,
                                      config.similarity) != (True, 1.0, False, "dot"):
        layer_weights = layer_weights.clone()  # the model view shows this layer as computed here
        layer_weights[config.layer] = steps["weights"]
    synchronize(device)
    elapsed_ms = (time.perf_counter() - start) * 1e3

    scores = steps["scores"]
    if config.model is None and not bool(torch.isfinite(torch.stack(torch.aminmax(scores))).all()):
        notes.append("some scores are not finite (overflow in this dtype); their weights are not defined")
    return AttentionResult(
        config=config,
        tokens=toks.tokens,
        token_ids=torch.tensor(toks.token_ids, dtype=torch.long, device=device),
        vocab=toks.vocab,
        x=x, w_q=weights.w_q, w_k=weights.w_k, w_v=weights.w_v, w_o=weights.w_o,
        b_q=weights.b_q, b_k=weights.b_k, b_v=weights.b_v, b_o=weights.b_o,
        elapsed_ms=elapsed_ms,
        device=str(device),
        notes=tuple(notes),
        layer_weights=layer_weights,
        **steps,
    )


def _random_inputs(config: AttentionConfig, toks: Tokens, device: torch.device, dtype: torch.dtype):
    """X (T, d) and the seeded projections on ``device``, in the config's layout."""
    params = draw_parameters(config, toks.token_ids, len(toks.vocab))
    x, w_q, w_k, w_v, w_o = (None if p is None else p.to(device=device, dtype=dtype, copy=True) for p in params)
    if config.positional:
        T, d = x.shape  # tokens, embedding size
        x = x + A.sinusoidal_positions(T, d, dtype=dtype, device=device)
    return x, Projections(w_q, w_k, w_v, w_o)


def _model_inputs(config: AttentionConfig, toks: Tokens, device: torch.device, dtype: torch.dtype):
    """The hidden state entering ``config.layer``, its projections, and every layer's weights."""
    model = source(config.model)
    ids = torch.tensor(toks.token_ids, dtype=torch.long)
    hidden, layer_weights = model.layer_inputs(ids, device, dtype)
    weights = model.layer_weights(config.layer, device, dtype)  # column layout
    if config.layout == "row":  # show W as d x d_k (q = x W): the same numbers, transposed
        weights = weights.transposed()
    return hidden[config.layer], weights, layer_weights


def as_dict(result: AttentionResult) -> dict[str, Any]:
    """Shapes and metadata of a result, JSON-ready (no tensor data)."""
    return {
        "tokens": list(result.tokens),
        "token_ids": result.token_ids.tolist(),
        "vocab": list(result.vocab),
        "shapes": {n: list(getattr(result, n).shape) for n in result.fields()},
        "device": result.device,
        "elapsed_ms": result.elapsed_ms,
        "notes": list(result.notes),
    }
