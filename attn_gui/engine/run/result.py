"""``AttentionResult``: every intermediate of one compute, named after the paper, and ``as_dict`` of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..kernel.scores import alibi_slopes, query_rows
from ..kernel.types import PositionTerms, Pooled, Projections, QKNorm, Rotary
from ..config.config import AttentionConfig
from ..model.plan import Plan
from .fields import FIELDS, TENSOR_FIELDS
from ..kernel.reduce import reduce_matrix
from ..kernel.summaries import Summaries


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

    A model read through transformers (``model.interop.via_transformers``) holds the steps its hooks
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
    plan: Plan = field(kw_only=True)  # the model as this compute resolved it (``engine.model.plan``): required
    # what ``full`` calls for a streamed result: ``compute`` hands itself (result.py does not import compute)
    recompute: Callable[[AttentionConfig], AttentionResult] | None = field(default=None, kw_only=True, repr=False,
                                                                            compare=False)

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
        """The plan this result was computed with (``engine.model.plan``): every view reads the model's arithmetic
        here."""
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
        if not self.streamed:
            return self
        assert self.recompute is not None, "a streamed result is made by compute, which hands its recompute"
        return self.recompute(self.config)

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
