"""Multi-head scaled dot-product attention, every step kept (``attend``).

Self-attention reads one sequence; cross-attention takes the queries from one and the
keys and values from another (``x_kv``, T_k tokens; T_k = T in self-attention).
Shapes: T tokens, d = d_model, h heads, d_k per-head query/key size, d_v per-head
value size. All functions are batched over heads; there is no loop over tokens or heads.
``attend`` also takes a batch of sequences (B, T, d), as the training loop calls it.
A streamed run (``Stream``) goes through the block loops of ``blocks``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import blocks
from .project import context_vectors, project_outputs, queries_keys_values, repeat_kv
from .scores import alibi_slopes, attention_scores, disentangled_terms, position_bias, scaled_scores, score_weights
from .types import AttendOptions, PLAIN, Pooled, PositionTerms, Projections, Steps, Stream


def attend(x: torch.Tensor, weights: Projections, options: AttendOptions = PLAIN, *,
           x_kv: torch.Tensor | None = None, past: tuple[torch.Tensor, torch.Tensor] | None = None,
           z_hook: Callable[[torch.Tensor], torch.Tensor] | None = None, stream: Stream | None = None) -> Steps:
    """Multi-head attention of ``x`` over ``x_kv`` (itself by default) with every intermediate kept.

    Parameters
    ----------
    x : (T, d) tensor, or (B, T, d): a batch of sequences, each attended as alone
        The tokens' input vectors (embeddings, or the hidden state entering a layer): the queries'.
    weights : Projections
        In ``options.layout``; all None for simplified attention (q = k = v = x, one head).
    options : AttendOptions
        Scale, temperature, mask, similarity, RoPE, soft-cap, ALiBi, window and DeBERTa's position terms.
    x_kv : (T_k, d) tensor, optional
        Cross-attention: the keys' and values' input vectors (another sentence); None: ``x``.
        (B, T_k, d) with a batch.
    past : (k, v), optional
        A key/value cache: the keys (g, P, d_k), after RoPE, and values (g, P, d_v) of the P
        tokens before ``x``. The rows of ``x`` are then positions P ... P + n - 1 (their
        RoPE angles and causal mask start at P) and attend to the cached keys and their own.
    z_hook : callable, optional
        Given the per-head outputs Z (h, T, d_v), returns what the concat and W_O read instead
        (a head ablated or patched, ``engine.analysis.interventions``); ``head_outputs`` is its result.
    stream : Stream, optional
        Keep the T x T fields only as ``reduce_matrix(field, reduce_to, reduce_to)`` would pool them
        (``Steps.pooled``, with each row's largest α), computed per block of query rows of about
        ``block_bytes``. The values are the same. Not with a batch, ``past``, ``softcap`` or ``relative``.

    Returns
    -------
    Steps
        q, k, v, the scores, scaled scores and weights (h, T, T_k), head outputs, concat and output, with
        the groups the options produce (``rope``, ``qk_norm``, ``positions``, ``capped``, ``pooled``).
        With ``past``, k and v are the whole cache, past rows then new (g, P + n, .), ready to be the next
        step's ``past``; q and RoPE's unrotated q and k are the n new rows; the T x T fields are (h, n, P + n).
        With a batch every field gains the leading B axis and equals that sequence's own ``attend`` up to
        the order of float sums (Q, K and V are then one matmul).
    """
    o = options
    if x.dim() > 2 and stream is not None:
        raise ValueError("a batch of sequences is not streamed (reduce_to)")
    if past is not None and stream is not None:
        raise ValueError("a key/value cache is not streamed")
    q, k, v, rope, qk_norm = queries_keys_values(x, weights, o, x_kv=x_kv, past=past)
    T, P = x.size(-2), 0 if past is None else past[0].size(-2)  # new tokens, cached positions before them
    T_k = k.size(-2) - P  # the new keys
    heads = q.size(-3)
    k_per_head, v_per_head = repeat_kv(k, heads), repeat_kv(v, heads)  # (h, T, n): head i uses K/V i // (h/g)
    d_k = q.size(-1)
    slopes = alibi_slopes(heads, q.dtype, q.device) if o.alibi else None  # (h,)

    if o.relative is not None and (stream is not None or past is not None):
        raise ValueError("disentangled attention is neither streamed nor cached")
    attn_scores: torch.Tensor | None = None
    scaled: torch.Tensor | None = None
    attn_weights: torch.Tensor | None = None
    capped: torch.Tensor | None = None
    positions: PositionTerms | None = None
    pooled: Pooled | None = None
    if stream is None:
        attn_scores = attention_scores(q, k_per_head, o.similarity)  # omega (h, T, P + T_k)
        summed = attn_scores
        terms: dict[str, torch.Tensor] = {}
        if o.relative is not None:  # DeBERTa: omega + c2p + p2c, over sqrt(d_k * scale_factor)
            terms = disentangled_terms(q, k_per_head, o.relative) if o.relative.index is not None else {}
            summed = sum(terms.values(), attn_scores)
        scaled = scaled_scores(summed, o, d_k, row_start=P, slopes=slopes)  # omega', -inf: masked
        capped, attn_weights = score_weights(scaled, o)  # Gemma 2's omega'' (else None); alpha, rows sum to 1
        context_vec = context_vectors(attn_weights, v_per_head)  # z (h, T, d_v)
        bias = None if slopes is None else position_bias(slopes, P, T, P + T_k, o.causal,
                                                          o.position_offset)  # (h, T, P + T_k)
        if terms or bias is not None:
            positions = PositionTerms(bias, terms.get("c2p"), terms.get("p2c"))
    else:
        context_vec, pooled = blocks.pooled_blocks(q, k_per_head, v_per_head, stream, o, slopes)
    if z_hook is not None:
        context_vec = z_hook(context_vec)  # an intervention (ablation, patching): Z shows what W_O reads
    concat, output = project_outputs(context_vec, weights, o.layout)
    return Steps(q, k, v, context_vec, concat, output, attn_scores, scaled, attn_weights, capped, rope, qk_norm,
                 positions, pooled)
