"""compute(config) -> AttentionResult: draw the inputs and weights, run every step, keep them all."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..kernel.attend import attend
from ..kernel.project import sinusoidal_positions
from ..kernel.scores import alibi_slopes, query_rows
from ..kernel.types import AttendOptions, PositionTerms, Pooled, Projections, QKNorm, Rotary, Steps, Stream
from ..config.config import AttentionConfig
from ..model.plan import Plan, plan
from ..base.devices import DTYPES, free_bytes, resolve_device, synchronize
from ..base.errors import DeviceError, TooLargeError
from .fields import FIELDS, TENSOR_FIELDS
from .draws import draw_parameters, weights_on
from .inputs import check_tokens, source_tokens_for, tokens_for, unknown_note
from ..model.hooks import ablation_hooks
from ..kernel.reduce import reduce_matrix
from ..kernel.summaries import TOP_K, Summaries, decay_edges
from ..text.tokens import Tokens

# bfloat16: a decoder's weight matmuls in bfloat16, the rest in float32 (sources.decoder.compute_dtypes)


# Attention computes h T x T scores. With the maps streamed (``display_max``) memory follows
# T, not T^2 (about 0.5 GiB at 32,768 tokens and 8 heads of 64), but the time does not: past
# these lengths one compute takes minutes on a CPU, so the limit is stated instead. A full
# compute is further bounded by the memory free on the device (``estimate_bytes``).
MAX_TOKENS = {"cpu": 32768, "cuda": 32768, "mps": 8192}

# A model run that is not streamed keeps every layer's T x T alpha: past this length it streams instead.
FULL_MODEL_MAX = 4096

# Below this estimate the free memory is not read: a compute this small always fits.
CHECK_FREE_ABOVE = 256 * 2**20


@dataclass(frozen=True)
class CrossInputs:
    """Cross-attention's second sentence: its T_k tokens (the keys' and values'), their ids (T_k,) in the
    result's ``vocab`` and their inputs X_src (T_k, d)."""

    tokens: tuple[str, ...]
    token_ids: torch.Tensor
    x: torch.Tensor


@dataclass(frozen=True)
class ModelRun:
    """What a model's run gives beside the layer shown.

    layer_weights : (L, h, T, T) every layer's α; None when streamed (``summaries`` holds the pooled maps)
    next_tokens : a decoder's five most likely next tokens after the sentence (readable token text,
        probability), highest first; None for an encoder
    summaries : every layer's sink mass, distance, decay, top keys (a decoder's), else None
    not_captured : a model read through transformers: the steps its hooks cannot see (None in the result)
    pending : a decoder's first maps (``compute(..., first=True)``): the layers its run has run so far, the rest
        (the other layers' α, the next tokens, the summaries: None here) still to come from ``compute(config)``;
        None for a whole run
    """

    layer_weights: torch.Tensor | None = None
    next_tokens: tuple[tuple[str, float], ...] | None = None
    summaries: Summaries | None = None
    not_captured: tuple[str, ...] = ()
    pending: int | None = None


class _Kept:
    """A field of ``FIELDS`` kept in one of the result's groups (``FieldInfo.kept``, "group.attribute"), read
    by its own name: ``result.rope_angles`` is ``result.rope.angles``, None where the group is None."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.group, self.attribute = FIELDS[name].kept.split(".")

    def __get__(self, result: Any, owner: Any = None) -> torch.Tensor | None:
        group = None if result is None else getattr(result, self.group)  # None: read on the class
        return None if group is None else getattr(group, self.attribute)


@dataclass(frozen=True)
class AttentionResult:
    """Every intermediate of one attention computation, named after the paper.

    Self-attention has T tokens; cross-attention (``config.cross``) takes its queries from the
    sentence's T tokens and its keys and values from the second sentence's T_k tokens
    (``cross``: ``source_tokens``, whose inputs are ``x_source``), so the maps below are T x T_k;
    in self-attention T_k = T and the keys are the sentence's own tokens.

    Tensors live on ``device``; per-head fields keep their head axis even when h = 1.
    The core (x, q, k, v, scores, scaled, weights, head_outputs, concat, output) is ``attend``'s
    (``attention.Steps``); what only some computations produce is grouped by what produces it,
    each group None where it does not apply:

    - ``projections`` (the draw or the model): ``w_q``, ``w_k``, ``w_v``, ``w_o`` (None without
      projections) and ``b_q``, ``b_k``, ``b_v``, ``b_o`` (None without biases);
    - ``rope`` (RoPE, ``attention.Rotary``): ``q_unrotated`` and ``k_unrotated``, q and k before
      the rotation (and before any norm), ``rope_angles`` and, for a scaled RoPE, ``rope_angles_plain``;
    - ``qk_norm`` (a model with per-head norms, Qwen3, OLMo 2): ``q_normed`` and ``k_normed``;
    - ``positions`` (ALiBi, DeBERTa): ``position_bias`` (None when streamed), ``c2p`` and ``p2c``;
    - ``capped`` (Gemma 2's soft-cap): the soft-capped scores;
    - ``pooled`` (streamed): the T x T fields pooled for the screen (``shown``);
    - ``cross`` (cross-attention): ``source_tokens``, ``source_token_ids``, ``x_source``;
    - ``model_run`` (model mode): ``layer_weights``, ``next_tokens``, ``summaries``, ``not_captured``.

    Each of those names reads as an attribute (``FIELDS[name].kept`` says where a tensor is kept).
    With grouped-query heads (``kv_heads`` g < h) ``w_k``, ``w_v``, ``b_k``, ``b_v``, ``k`` and
    ``v`` have g heads; the scores, weights and outputs have h.

    A model read through transformers (``sources.via_transformers``) holds the steps its hooks
    captured; any other step is None, even x, q, k, v and the outputs, and is named in ``not_captured``.

    A *streamed* result (``compute(config, display_max=...)`` with T over ``display_max``)
    has no ``scores``, ``scaled`` or ``weights`` tensors: ``shown`` holds them pooled for the
    screen, ``row`` recomputes one query row, and ``numpy``, ``to_numpy`` and ``full``
    compute the full tensors again when they are asked for. A streamed model result has no
    ``layer_weights`` either: its ``summaries`` hold every layer's numbers and pooled maps.

    The weights are shared with the draw cache, not copied: change them in place and the
    next compute draws them again; ``numpy`` hands out read-only views.
    """

    config: AttentionConfig
    tokens: tuple[str, ...]
    token_ids: torch.Tensor  # (T,)
    vocab: tuple[str, ...]
    x: torch.Tensor | None  # (T, d)
    projections: Projections  # in the config's layout; all None without projections
    q: torch.Tensor | None  # (h, T, d_k)
    k: torch.Tensor | None  # (g, T_k, d_k), after RoPE
    v: torch.Tensor | None  # (g, T_k, d_v)
    scores: torch.Tensor | None  # (h, T, T_k) omega; None when streamed
    scaled: torch.Tensor | None  # (h, T, T_k) omega / sqrt(d_k) / temperature, masked -inf
    weights: torch.Tensor | None  # (h, T, T_k) alpha
    head_outputs: torch.Tensor | None  # (h, T, d_v) z
    concat: torch.Tensor | None  # (T, h*d_v)
    output: torch.Tensor | None  # (T, d)
    elapsed_ms: float
    device: str
    notes: tuple[str, ...] = field(default=())
    capped: torch.Tensor | None = None  # (h, T, T_k) soft-capped scores c tanh(omega' / c) (Gemma 2), masked -inf
    rope: Rotary | None = None
    qk_norm: QKNorm | None = None
    positions: PositionTerms | None = None
    pooled: Pooled | None = None
    cross: CrossInputs | None = None
    model_run: ModelRun | None = None
    plan: Plan = field(kw_only=True)  # the model as this compute resolved it (``engine.plan``): required

    w_q = _Kept()  # (h, d, d_k) row / (h, d_k, d) column
    w_k = _Kept()  # (g, d, d_k) row / (g, d_k, d) column; g = kv_heads
    w_v = _Kept()  # (g, d, d_v) row / (g, d_v, d) column
    w_o = _Kept()  # (h*d_v, d) row / (d, h*d_v) column
    b_q = _Kept()  # (h, 1, d_k)
    b_k = _Kept()  # (g, 1, d_k)
    b_v = _Kept()  # (g, 1, d_v)
    b_o = _Kept()  # (1, d)
    q_unrotated = _Kept()  # (h, T, d_k)
    k_unrotated = _Kept()  # (g, T_k, d_k)
    rope_angles = _Kept()  # (T, d_k/2): the angle of each pair at each position
    rope_angles_plain = _Kept()  # (T, d_k/2): a scaled RoPE's angles before its scaling
    q_normed = _Kept()  # (h, T, d_k): q after q_norm, before RoPE
    k_normed = _Kept()  # (g, T_k, d_k)
    position_bias = _Kept()  # (h, T, T_k) ALiBi's bias
    c2p = _Kept()  # (h, T, T_k) DeBERTa's content -> position term of the scores
    p2c = _Kept()  # (h, T, T_k) position -> content
    x_source = _Kept()  # (T_k, d) cross-attention: the second sentence's inputs

    @property
    def source_tokens(self) -> tuple[str, ...] | None:
        """Cross-attention: the second sentence's T_k tokens; else None."""
        return None if self.cross is None else self.cross.tokens

    @property
    def source_token_ids(self) -> torch.Tensor | None:
        """Cross-attention: the second sentence's ids (T_k,) in ``vocab``; else None."""
        return None if self.cross is None else self.cross.token_ids

    @property
    def layer_weights(self) -> torch.Tensor | None:
        """(L, h, T, T): every layer's alpha, model mode only, not when streamed."""
        return None if self.model_run is None else self.model_run.layer_weights

    @property
    def next_tokens(self) -> tuple[tuple[str, float], ...] | None:
        """A decoder model's top 5 next tokens (token, probability); else None."""
        return None if self.model_run is None else self.model_run.next_tokens

    @property
    def summaries(self) -> Summaries | None:
        """A decoder model's every layer's sink mass, distance, decay, top keys; else None."""
        return None if self.model_run is None else self.model_run.summaries

    @property
    def not_captured(self) -> tuple[str, ...]:
        """A model read through transformers: the steps its hooks cannot see (None here); else ()."""
        return () if self.model_run is None else self.model_run.not_captured

    @property
    def shown(self) -> dict[str, torch.Tensor] | None:
        """Streamed only: scores, scaled and weights pooled, (h, r, r_k); else None."""
        return None if self.pooled is None else self.pooled.maps

    @property
    def seq_len(self) -> int:
        """T, the number of query tokens (the sentence's)."""
        return len(self.tokens)

    @property
    def key_tokens(self) -> tuple[str, ...]:
        """The tokens of the keys and values: the second sentence's in cross-attention, else the sentence's."""
        return self.tokens if self.cross is None else self.cross.tokens

    @property
    def key_len(self) -> int:
        """T_k, the number of keys (T in self-attention)."""
        return len(self.key_tokens)

    @property
    def heads(self) -> int:
        return next(t for t in (self.q, self.weights, self.head_outputs) if t is not None).shape[0]

    @property
    def position_terms(self) -> tuple[str, ...]:
        """The terms the scores add to ω before the scale: DeBERTa's "c2p" and "p2c" where it has them; ()."""
        return tuple(t for t in ("c2p", "p2c") if getattr(self, t) is not None)

    @property
    def streamed(self) -> bool:
        """True when the T x T fields are kept only as displayed (see ``shown``)."""
        return self.pooled is not None

    @property
    def resolved(self) -> Plan:
        """The plan this result was computed with (``engine.plan``): every view reads the model's arithmetic here."""
        return self.plan

    def head_index(self, name: str, head: int) -> int:
        """Where query head ``head`` reads per-head field ``name``: ``head``, or its key/value
        head for the fields that have kv_heads g < h heads (w_k, w_v, b_k, b_v, k, v, k_unrotated, k_normed)."""
        n = self.shape(name)[0]
        return head if n == self.heads else head // (self.heads // n)

    def fields(self) -> tuple[str, ...]:
        """Names of the tensor fields of this result (streamed ones included), in data-flow order."""
        return tuple(n for n in TENSOR_FIELDS if getattr(self, n) is not None or (self.shown and n in self.shown))

    def shape(self, name: str) -> tuple[int, ...]:
        """The full shape of field ``name``, also for a streamed field."""
        if self.shown is not None and name in self.shown:
            return (self.heads, self.seq_len, self.key_len)
        return tuple(getattr(self, name).shape)

    def full(self) -> AttentionResult:
        """This result with every T x T tensor: itself, or (streamed) the same config computed in full.

        Raises ``TooLargeError`` when the full tensors do not fit in the device's free memory.
        """
        return compute(self.config) if self.streamed else self

    def numpy(self, name: str) -> np.ndarray:
        """The full field ``name`` as a host numpy array, read-only (on the CPU it shares the tensor's memory).

        A streamed field is computed in full first: call ``full()`` once for several.
        """
        t = getattr(self, name)
        if t is None and self.shown is not None and name in self.shown:
            t = getattr(self.full(), name)
        out = t.detach().cpu().numpy()
        out.flags.writeable = False  # the weights are the draw cache's; copy to change
        return out

    def to_numpy(self) -> dict[str, np.ndarray]:
        """Every tensor field as a numpy array, plus ``token_ids``."""
        src = self.full()
        out = {n: src.numpy(n) for n in src.fields()}
        out["token_ids"] = self.token_ids.cpu().numpy()
        return out

    def row(self, name: str, head: int, token: int) -> torch.Tensor:
        """Query ``token``'s row (T_k,) of scores, scaled or weights in ``head``, on the device.

        A streamed result computes it again from q_i and K, the same values as the full row.
        """
        t = getattr(self, name)
        if t is not None:
            return t[head, token]
        options, q, k = self.resolved.shown, self.q, self.k
        if q is None or k is None:  # a model read through transformers: no q, k to recompute it from
            raise ValueError(f"{name} is not captured for this model, and q and k are not held to recompute it")
        kv_head = self.head_index("k", head)  # the K/V head this query head reads
        slopes = alibi_slopes(self.heads, q.dtype, q.device)[head:head + 1] if options.alibi else None
        rows = query_rows(q[head:head + 1, token:token + 1], k[kv_head:kv_head + 1], token, options, slopes)
        return rows[name][0, 0]

    def display(self, name: str, max_rows: int = 512, max_cols: int = 512) -> np.ndarray:
        """Field ``name`` reduced on its device to at most max_rows x max_cols per matrix, as numpy."""
        t = getattr(self, name)
        if t is None and self.shown is not None and name in self.shown:
            kept = self.shown[name]
            if tuple(kept.shape[-2:]) == (min(self.seq_len, max_rows), min(self.key_len, max_cols)):
                return kept.detach().cpu().numpy()
            t = getattr(self.full(), name)  # another size: pool the full field
        return reduce_matrix(t, max_rows, max_cols, FIELDS[name].kind).detach().cpu().numpy()


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


def compute(config: AttentionConfig, display_max: int | None = None, *, first: bool = False) -> AttentionResult:
    """Run self-attention for ``config`` and return every intermediate.

    The model is resolved once (``engine.plan.plan``); the result carries the plan (``AttentionResult.plan``).

    Parameters
    ----------
    config : AttentionConfig
    display_max : int, optional
        When T exceeds it (random weights), stream: compute the T x T fields head by head
        and block by block of query rows, and keep them only pooled to at most
        display_max x display_max (``reduce_matrix``'s values); the result's ``scores``,
        ``scaled`` and ``weights`` are then None and ``shown`` holds them. Memory then
        follows T instead of T^2. Without it (or at T <= display_max) every field is kept in full.
    first : bool
        A decoder model (not streamed, no ablation): the shown layer's maps as soon as the layers before it
        have run, nothing more (``ModelRun.pending``: no next tokens, no other layer's α, no summaries). The
        run is kept: ``compute(config)`` then runs the rest from the kept residual, and another layer inside
        what has run costs no layer at all.

    Raises
    ------
    ConfigError
        The sentence has no tokens, or more than the model reads; a layer or head the model lacks; a what-if
        option this path cannot run (``Plan.check``).
    ModelUnavailable
        Model mode, and the model is not installed.
    DeviceError
        The device is absent, gone away or out of memory.
    TooLargeError
        The estimate exceeds the memory free on the device (checked before allocating).
    """
    p = plan(config)
    device = resolve_device(config.device)
    toks = check_tokens(config, p)
    source = source_tokens_for(config)
    heads = p.dims.heads
    T, limit = len(toks.tokens), MAX_TOKENS[device.type]
    if T > limit:
        raise TooLargeError(f"T = {T:,} tokens is over the limit of {limit:,} on {device.type} "
                            f"(attention computes {heads} × T × T scores; past it one compute takes minutes)")
    reduce_to = p.reduce_to(T, display_max)
    if p.spec is not None and reduce_to is None and T > FULL_MODEL_MAX:
        raise TooLargeError(f"T = {T:,} tokens: {p.spec.label} keeps every layer's T × T alpha "
                            f"up to {FULL_MODEL_MAX} tokens; longer inputs are streamed (display_max)")
    p.check(streamed=p.spec is not None and reduce_to is not None)
    if source is not None and len(source.tokens) > limit:
        raise TooLargeError(f"the second sentence has T_k = {len(source.tokens):,} tokens, over the limit of "
                            f"{limit:,} on {device.type}")
    need = estimate_bytes(config, display_max, p)
    free = free_bytes(device) if need > CHECK_FREE_ABOVE else None
    if free is not None and need > 0.8 * free:
        raise TooLargeError(
            f"T = {T:,} with {heads} head(s) and these sizes needs about {_human(need)}; "
            f"{config.device} has {_human(free)} free"
        )
    try:
        return _compute(p, toks, source, device, reduce_to, first)
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


def _compute(p: Plan, toks: Tokens, source: Tokens | None, device: torch.device,
             reduce_to: int | None, first: bool = False) -> AttentionResult:
    config = p.config
    dtype = DTYPES[config.dtype]
    start = time.perf_counter()
    if p.can.captured:
        return _captured(p, toks, device, dtype, start)
    x_source, ids = None, toks.id_tensor()
    run: ModelRun | None = None
    ready: Steps | None = None  # the shown layer's steps, made by a streamed model run
    vocab = toks.vocab
    if p.spec is None:
        x, x_source, weights, both = _random_inputs(config, toks, source, device, dtype)
        ids, vocab = both.id_tensor(), both.vocab  # cross-attention: ids in one vocabulary for both sentences
        options = p.shown
        notes = []
    else:
        x, weights, run, options, ready = _model_inputs(p, toks, device, dtype, reduce_to, first)
        unknown = unknown_note(config, toks, p)
        notes = [*([unknown] if unknown else []), *([p.what_if_text()] if p.what_if else []), *p.spec.about]
    stream = None if reduce_to is None else Stream(reduce_to, _block_bytes(device))
    steps = ready if ready is not None else attend(
        x, weights, options, x_kv=x_source, stream=stream,
        z_hook=ablation_hooks(config.ablate).get(config.layer) if config.model else None)
    synchronize(device)
    elapsed_ms = (time.perf_counter() - start) * 1e3

    if p.spec is None and not _scores_finite(steps, config):
        notes.append("some scores are not finite (overflow in this dtype); their weights are not defined")
    T = len(toks.tokens)
    cross = None if source is None or x_source is None else CrossInputs(source.tokens, ids[T:].to(device), x_source)
    return AttentionResult(
        config=config,
        tokens=toks.tokens,
        token_ids=(ids if source is None else ids[:T]).to(device),
        vocab=vocab,
        x=x,
        projections=weights,
        elapsed_ms=elapsed_ms,
        device=str(device),
        notes=tuple(notes),
        cross=cross,
        model_run=run,
        plan=p,
        **{f.name: getattr(steps, f.name) for f in dataclasses.fields(Steps)},  # attend's steps, by the same names
    )


def _captured(p: Plan, toks: Tokens, device: torch.device, dtype: torch.dtype, start: float) -> AttentionResult:
    """Model ``name`` read through transformers (``sources.via_transformers``): the steps its hooks captured,
    None for the others (named in ``not_captured``); attn-gui computes none of them."""
    from ..model.interop.via_transformers import captured

    config, spec, name = p.config, p.spec, p.config.model
    assert spec is not None and name is not None  # model mode
    ids = toks.id_tensor()
    steps, layer_weights, missing = captured(name, ids, config.layer, device, dtype)
    next_tokens = p.source.next_tokens(ids, device, dtype)
    synchronize(device)
    unknown = unknown_note(config, toks, p)
    q_unrotated, k_unrotated = steps.get("q_unrotated"), steps.get("k_unrotated")  # RoPE's, where captured
    rope = None if q_unrotated is None and k_unrotated is None else Rotary(q_unrotated, k_unrotated)
    return AttentionResult(
        config=config, tokens=toks.tokens, token_ids=ids.to(device), vocab=toks.vocab, projections=Projections(),
        elapsed_ms=(time.perf_counter() - start) * 1e3, device=str(device),
        notes=(*([unknown] if unknown else []), *spec.about),
        model_run=ModelRun(layer_weights, next_tokens, not_captured=missing), x=steps.get("x"),
        rope=rope, q=steps.get("q"), k=steps.get("k"), v=steps.get("v"), scores=steps.get("scores"),
        scaled=steps.get("scaled"), weights=steps.get("weights"),
        head_outputs=steps.get("head_outputs"), concat=steps.get("concat"), output=steps.get("output"), plan=p)


def _scores_finite(steps: Steps, config: AttentionConfig) -> bool:
    """Whether every score is finite: by a bound first, scanning the scores only when it fails.

    |q_i . k_j| <= d_k max|q| max|k|, and a cosine is at most 1 when q and k are finite.
    """
    q, k = steps.q, steps.k
    big = torch.stack([q.abs().amax(), k.abs().amax()]).tolist()  # one copy to the host
    d_k = q.shape[-1]
    bound = 1.0 if config.similarity == "cosine" else d_k * big[0] * big[1]
    if math.isfinite(big[0]) and math.isfinite(big[1]) and bound < torch.finfo(q.dtype).max / 2:
        return True
    scores = steps.scores
    if scores is None:  # streamed: the pooled scores keep the extremes
        assert steps.pooled is not None
        scores = steps.pooled.maps["scores"]
    return bool(torch.isfinite(torch.stack(torch.aminmax(scores))).all())


def _random_inputs(config: AttentionConfig, toks: Tokens, source: Tokens | None, device: torch.device,
                   dtype: torch.dtype):
    """X (T, d), the second sentence's X_src (T_k, d) or None, the seeded projections on ``device`` in the
    config's layout (shared, not copied), and the tokens X was drawn for.

    Cross-attention draws X once for both sentences, one after the other (one vocabulary), and
    splits it, so X_src comes from the same draw as X whatever ``inputs`` says.
    """
    both = toks if source is None else toks.joined(source)
    x, *params = draw_parameters(config, both)
    x = x.to(device=device, dtype=dtype)
    T = len(toks.tokens)
    parts = [x[:T]] if source is None else [x[:T], x[T:]]  # (T, d), (T_k, d)
    if config.positional == "sinusoidal":  # each sentence from position_offset on
        parts = [part + sinusoidal_positions(part.size(0), part.size(1), dtype=dtype, device=device,
                                               offset=config.position_offset) for part in parts]
    x_source = parts[1] if source is not None else None
    return parts[0], x_source, Projections(*weights_on(tuple(params), device, dtype)), both


def _model_inputs(p: Plan, toks: Tokens, device: torch.device, dtype: torch.dtype, reduce_to: int | None,
                  first: bool = False
                  ) -> tuple[torch.Tensor, Projections, ModelRun, AttendOptions, Steps | None]:
    """What the shown layer reads, its projections, the run's every layer's weights (None when streamed:
    ``reduce_to``), next tokens (or None) and summaries (a decoder's; None for an encoder), the options
    its attention runs with (the plan's, with what only the loaded model holds: DeBERTa's position terms,
    ``ModelSource.layer_options``), and the shown layer's steps where a streamed run made them (else None).

    Every layer runs with the plan's options (``Plan.layers``: the model's own, or a what-if in every layer),
    so the shown layer, the model view and the next tokens all come from one forward. ``first``: a decoder's X of
    the shown layer only, having run the layers before it (``compute``); the run is kept for a later compute."""
    config, model, layers = p.config, p.source, p.layers
    ids = toks.id_tensor()
    summaries = None
    made: tuple[int, Steps] | None = None  # streamed: the shown layer and its steps, as the run made them
    if first and reduce_to is None and not config.ablate and p.can.decoder:
        x, done = _decoder(p).first_input(ids, device, dtype, config.layer, layers)  # the layers before it
        if done < len(p.layers):  # else the whole run is there: given whole, below
            options = model.layer_options(p.shown, config.layer, len(toks.tokens), device, dtype)
            weights = model.layer_weights(config.layer, device, dtype)  # column layout
            shown = weights.transposed() if config.layout == "row" else weights
            return x, shown, ModelRun(pending=done), options, None
    if config.ablate:  # every layer above a struck head reads a changed residual stream, and so does the next token
        decoder = _decoder(p)
        run = decoder.forward(ids, device, dtype, z_hooks=ablation_hooks(config.ablate), reduce_to=reduce_to,
                              shown_layer=config.layer, layers=layers)
        hidden, layer_weights, next_tokens = run.inputs, run.weights, decoder.top_tokens(run.logits)
        summaries = run.summaries
        made = run.shown
    elif reduce_to is not None:  # streamed (a decoder, ``Capabilities.stream``): no layer keeps its T x T maps
        decoder = _decoder(p)
        run = decoder.streamed_inputs(ids, device, dtype, reduce_to, _block_bytes(device), config.layer, layers)
        hidden, layer_weights, summaries = [*run.inputs, run.residual[-1]], None, run.summaries
        next_tokens = decoder.top_tokens(run.logits)
        made = run.shown
    else:
        hidden, layer_weights = model.layer_inputs(ids, device, dtype, layers)
        next_tokens = model.next_tokens(ids, device, dtype, layers=layers)
        if p.can.decoder:  # a decoder's, from its kept run
            summaries = _decoder(p).summaries(ids, device, dtype, layers)
    weights = model.layer_weights(config.layer, device, dtype)  # column layout
    if config.layout == "row":  # show W as d x d_k (q = x W): the same numbers, transposed
        weights = weights.transposed()
    options = model.layer_options(p.shown, config.layer, len(toks.tokens), device, dtype)
    ready = None  # the shown layer's steps as the run made them (streamed: the same plan)
    if made is not None and made[0] == config.layer and made[1].pooled is not None:
        ready = _streamed_steps(made[1])
    return hidden[config.layer], weights, ModelRun(layer_weights, next_tokens, summaries), options, ready


def _decoder(p: Plan):
    """The plan's source as a decoder (``sources.decoder.Source``)."""
    from ..model.decoder.source import Source as DecoderSource

    model = p.source
    assert isinstance(model, DecoderSource)  # the plan streams and ablates decoders only
    return model


def _streamed_steps(made: Steps) -> Steps:
    """``attend(..., stream=)``'s steps from a streamed layer's (``attention.attend_summarised(shown=True)``):
    the same fields, its pooled maps and each row's largest α."""
    kept = made.pooled
    assert kept is not None and kept.row_max is not None  # attend_summarised(shown=True) pools all three
    maps = {name: kept.maps[name] for name in ("scores", "scaled", "weights")}
    return dataclasses.replace(made, pooled=Pooled(maps, row_max=kept.row_max))


def as_dict(result: AttentionResult) -> dict[str, Any]:
    """Shapes and metadata of a result, JSON-ready (no tensor data)."""
    return {
        "tokens": list(result.tokens),
        "token_ids": result.token_ids.tolist(),
        "vocab": list(result.vocab),
        **({} if result.source_tokens is None or result.source_token_ids is None else {
            "source_tokens": list(result.source_tokens), "source_token_ids": result.source_token_ids.tolist()}),
        "shapes": {n: list(result.shape(n)) for n in result.fields()},
        "device": result.device,
        "elapsed_ms": result.elapsed_ms,
        "notes": list(result.notes),
        "next_tokens": None if result.next_tokens is None else [list(p) for p in result.next_tokens],
        **({"not_captured": list(result.not_captured)} if result.not_captured else {}),
    }
