"""The block loops: a long input's attention in blocks of query rows, so that no T x T field is kept
whole. ``pooled_blocks`` keeps the pooled maps (``attend`` with a ``Stream``); ``attend_summarised`` fills a
layer's summaries (``summaries.LayerSums``) as the model's forward streams it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..base import progress
from .project import context_vectors, project_outputs, queries_keys_values, repeat_kv
from .scores import masked_keys, query_rows, scaled_scores, score_weights
from .types import AttendOptions, Pooled, Projections, Steps, Stream


def attend_summarised(x: torch.Tensor, weights: Projections, options: AttendOptions, stream: Stream, *,
                      shown: bool = False, z_hook: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Steps:
    """A decoder layer's causal self-attention at any length, no T x T tensor kept: what the next layer needs.

    The same q, k, v, z and output as ``attend(x, weights, options)`` (the same rows of α, a block of
    query rows of about ``stream.block_bytes`` of scores at a time); of the maps only α is kept, pooled to
    at most ``stream.reduce_to`` per side as ``reduce_matrix`` pools it, with the last query's row and the
    summaries (``summaries``: sink mass, distance, decay, top keys) of every head.

    ``options`` must be causal attention without ALiBi, soft-cap, offset or position terms (a decoder's: its
    scale, temperature, RoPE, window and sinks are read, and a cosine similarity).

    ``shown``: the layer on screen. Its ω and scaled scores are pooled too, from the same blocks (ω of
    every key, the later ones' too, as ``attend(..., stream=)`` pools them), so that the layer is
    not computed a second time for its maps.

    Returns
    -------
    Steps
        q, k, v, head_outputs, concat, output (and RoPE's and the q/k norms' groups) as ``attend``'s, and
        ``pooled``: maps {"weights": (h, r, r_k)} (with ``shown`` also "scores" and "scaled", and
        ``row_max`` (h, T) as ``attend(..., stream=)``'s), last_row (h, T) and summaries
        (``LayerSums.finish``)
    """
    from .reduce import block_edges, block_runs, pool_row_blocks, reduce_row_blocks
    from .summaries import LayerSums, row_stats

    o = options
    if not o.causal or o.alibi or o.softcap is not None or o.position_offset or o.relative is not None:
        raise ValueError("attend_summarised runs causal attention only (no ALiBi, soft-cap, offset or position "
                         "terms)")
    reduce_to, block_bytes = stream.reduce_to, stream.block_bytes
    q, k, v, rope, qk_norm = queries_keys_values(x, weights, o)
    h, T, d_k = q.shape  # heads, tokens, head size
    k_per_head, v_per_head = repeat_kv(k, h), repeat_kv(v, h)  # (h, T, d_k): head i uses K/V i // (h/g)
    q_dot, k_dot = (F.normalize(q, dim=-1), F.normalize(k_per_head, dim=-1)) if o.similarity == "cosine" \
        else (q, k_per_head)  # a cosine is the dot product of unit vectors: normalised once, not per block
    side = min(T, reduce_to)
    edges = block_edges(T, side)
    rows_per_block = max(1, block_bytes // (h * T * q.element_size()))
    pooled = q.new_empty(h, side, side)
    signed = {name: q.new_empty(h, side, side) for name in ("scores", "scaled")} if shown else {}
    context_vec = q.new_empty(h, T, v.size(-1))  # z (h, T, d_v)
    sums = LayerSums(h, T, T, q.device, q.dtype)
    for first, last in block_runs(edges, rows_per_block):  # runs of whole pooling blocks
        progress.check()  # a window's Esc stops a long sentence within a block of rows
        start, end = edges[first][0], edges[last - 1][1]
        # causal: these rows see keys before ``end`` only; the later keys' alpha is 0 and is not computed
        hidden = masked_keys(start, end - start, end, True, o.window, o.sink_tokens, q.device)  # (n, end)
        assert hidden is not None  # causal: never every key
        if shown:  # ω of every key (h, n, T): the map of ω shows the later keys' too
            omega = q_dot[:, start:end] @ k_dot.transpose(-2, -1)
            signed["scores"][:, first:last] = reduce_row_blocks(omega, edges[first:last], start, side)
            scaled = scaled_scores(omega[..., :end], o, d_k, row_start=start)  # ω′ (h, n, end), masked
        else:
            scaled = scaled_scores(q_dot[:, start:end] @ k_dot[:, :end].transpose(-2, -1), o, d_k, row_start=start,
                                   in_place=True)  # ω′ (h, n, end), the softmax's input
        _, alpha = score_weights(scaled, o)  # (h, n, end)
        context_vec[:, start:end] = context_vectors(alpha, v_per_head[:, :end])  # (h, n, d_v)
        pooled[:, first:last] = pool_row_blocks(alpha, edges[first:last], start, side, width=T)  # later keys: 0
        if shown:  # the later keys' scaled scores are -inf (masked)
            signed["scaled"][:, first:last] = reduce_row_blocks(scaled, edges[first:last], start, side, width=T)
        sums.add(row_stats(alpha, start, hidden, causal=True, width=T, scores=scaled), start)  # ω′ overwritten
    last_row = alpha[:, -1].clone()  # (h, T): the last block ends at T; a copy, not a view holding the block
    if z_hook is not None:
        context_vec = z_hook(context_vec)  # an intervention (ablation): Z shows what W_O reads
    concat, output = project_outputs(context_vec, weights, o.layout)
    summary = sums.finish()
    row_max = None
    maps = {"weights": pooled}
    if shown:  # each row's largest α: its top key's
        maps.update(signed)
        row_max = summary["top_weights"][..., 0]
    kept = Pooled(maps, row_max=row_max, last_row=last_row, summaries=summary)
    return Steps(q, k, v, context_vec, concat, output, rope=rope, qk_norm=qk_norm, pooled=kept)


def pooled_blocks(q, k, v, stream: Stream, options: AttendOptions, slopes: torch.Tensor | None):
    """z (h, T, d_v) and the T x T_k fields pooled to at most reduce_to per side (``Pooled``), block by block
    of rows.

    Every head is computed at once, ``block_bytes`` of scores at a time. Each block of query
    rows holds whole pooling blocks (``reduce.block_edges``), so pooling it at once gives
    exactly the rows of the pooled full matrix.
    """
    from .reduce import block_edges, block_runs, reduce_matrix, reduce_row_blocks

    h, T, d_k = q.shape  # heads, query tokens, head size
    T_k = k.size(-2)  # key tokens
    side, cols = min(T, stream.reduce_to), min(T_k, stream.reduce_to)
    if options.similarity == "cosine":  # normalise once, not per block
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        options = options.replace(similarity="dot")
    edges = block_edges(T, side)
    groups = block_runs(edges, max(1, stream.block_bytes // (h * T_k * q.element_size())))  # of pooling blocks
    kinds = {"scores": "signed", "scaled": "signed", "weights": "weights"}
    shown = {name: q.new_empty(h, side, cols) for name in kinds}
    context_vec = q.new_empty(h, T, v.size(-1))  # z (h, T, d_v)
    row_max = q.new_empty(h, T)  # each row's largest alpha: how one-hot the softmax is, per row
    for b0, b1 in groups:
        progress.check()
        start, end = edges[b0][0], edges[b1 - 1][1]  # query rows of these pooling blocks
        rows = query_rows(q[:, start:end], k, start, options, slopes)  # each (h, n, T_k)
        context_vec[:, start:end] = context_vectors(rows["weights"], v)  # (h, n, d_v)
        row_max[:, start:end] = rows["weights"].amax(-1)
        for name, kind in kinds.items():
            if len(groups) == 1:  # every row at once (a GPU's block): pool as the display does
                shown[name] = reduce_matrix(rows[name], side, side, kind)
            else:
                shown[name][:, b0:b1] = reduce_row_blocks(rows[name], edges[b0:b1], start, side, kind)
    return context_vec, Pooled(shown, row_max=row_max)


KEPT_BLOCK_BYTES = 16 * 2**20  # ω and α of a block of rows (``kept_attention``): 4 and 64 MiB were slower


def kept_attention(x: torch.Tensor, p: Projections, alpha: torch.Tensor, scratch: torch.Tensor,
                   options: AttendOptions, *, past: tuple[torch.Tensor, torch.Tensor] | None = None, z_hook=None,
                   summaries: list | None = None) -> Steps:
    """``attend(x, p, options, past=past)``'s α, q, k, v, z and output, nothing else kept; with ``summaries``,
    the layer's summaries (``summaries.LayerSums.finish``'s) appended to it.

    A model run keeps only these of every layer; ω and ω′ are the shown layer's alone, which
    ``attend`` makes again. Here the query rows go a block at a time, each block against the keys
    up to its last query only (causal: the later keys' α is 0, and is written as 0): its ω made in
    ``scratch`` (``kept_scratch``'s size, reused layer after layer), divided and masked in place as
    ``scale_and_mask`` does it, its α written into ``alpha`` (this layer's slice of every layer's α)
    and its summaries taken while it is in the cache, as the streamed path takes them. No layer
    allocates a T x T tensor of its own. α and z equal ``attend``'s up to the order of the float
    sums over the keys (the same keys, fewer masked ones). ``options``: a decoder layer's
    (``LlamaShape.options``: column layout, its scaling, mask, RoPE, window and soft-cap).
    """
    from .summaries import TOP_K, LayerSums, row_stats

    o = options
    q, k, v, rope, qk_norm = queries_keys_values(x, p, o, past=past)  # (h, n, d_k), (g, P + n, .)
    heads, n, d_k = q.shape  # heads, new tokens, head size
    T_k = k.size(-2)  # the cached keys and the new ones
    P = T_k - n  # cached positions before the new rows
    k_per_head, v_per_head = repeat_kv(k, heads), repeat_kv(v, heads)  # (h, T_k, .): head i uses K/V i // (h/g)
    if o.similarity == "cosine":  # the dot product of unit vectors: normalised once, not per block
        q, k_per_head = F.normalize(q, dim=-1), F.normalize(k_per_head, dim=-1)
    keys_t = k_per_head.transpose(-2, -1)  # (h, d_k, T_k)
    context_vec = q.new_empty(heads, n, v.size(-1))  # z (h, n, d_v)
    sums = LayerSums(heads, n, T_k, q.device, torch.float32 if q.dtype != torch.float64 else q.dtype) \
        if summaries is not None else None
    rows = max(1, min(n, scratch.numel() // (2 * heads * T_k)))  # ω and α of a block fit in ``scratch``
    for start in range(0, n, rows):
        progress.check()  # a window's Esc stops a long sentence within a block of rows
        end = min(n, start + rows)
        # causal: these rows see keys before ``seen`` at most (k top keys: k at least); else every key
        seen = min(T_k, max(P + end, TOP_K)) if o.causal else T_k
        size = (heads, end - start, seen)
        count = math.prod(size)
        omega = torch.matmul(q[:, start:end], keys_t[..., :seen], out=scratch[:count].view(size))  # ω
        scaled = scaled_scores(omega, o, d_k, row_start=P + start, in_place=True)  # ω′, masked -inf
        capped, block = score_weights(scaled, o, out=scratch[count:2 * count].view(size))  # α
        alpha[:, start:end, :seen] = block
        alpha[:, start:end, seen:] = 0.0
        context_vec[:, start:end] = block @ v_per_head[:, :seen]  # z (h, rows, d_v)
        if sums is not None:
            hidden = masked_keys(P + start, end - start, seen, o.causal, o.window, o.sink_tokens, x.device)
            sums.add(row_stats(block, start, hidden, causal=o.causal, width=T_k,
                               scores=scaled if capped is None else capped), start)  # the softmax's input, overwritten
    if z_hook is not None:
        context_vec = z_hook(context_vec)  # an intervention (ablation, patching)
    concat, output = project_outputs(context_vec, p, "column")  # (n, h d_v), (n, d) with b_O
    if summaries is not None and sums is not None:
        summaries.append(sums.finish())
    return Steps(q, k, v, context_vec, concat, output, weights=alpha, rope=rope, qk_norm=qk_norm)


def kept_scratch(heads: int, n: int, T_k: int, element_size: int = 4, block_bytes: int = KEPT_BLOCK_BYTES) -> int:
    """The elements of ``kept_attention``'s scratch for n new rows over T_k keys: ω and α of its largest block."""
    rows = max(1, min(n, block_bytes // (2 * heads * T_k * element_size)))
    return 2 * heads * rows * T_k
