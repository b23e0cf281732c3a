"""``summaries.row_stats``' entropy read from the scores, and its top keys of wide rows, against torch.

A run takes each block's entropy from the scores the softmax read (−ln α_m + Σ α (s_m − s)); the peer is the
definition, torch's ``entr`` summed over the keys of ``torch.softmax`` of the same scores. Rows of 4,096 keys and
more take their top k by chunks (``largest``); the peer is ``torch.topk``.
"""

import pytest
import torch

from attn_gui.engine.kernel.scores import masked_keys
from attn_gui.engine.kernel.summaries import WIDE, largest, row_stats


@pytest.mark.parametrize("spread, window", [(1.0, None), (8.0, None), (8.0, 5), (30.0, None)])
def test_entropy_from_scores_is_the_definition(spread, window):
    """Scores of every spread a real model has (a sink head's reach 30 and more), causal, with a window too,
    in rows that are not the first (a block after others): the entropy equals the definition's."""
    g = torch.Generator().manual_seed(0)
    start, n, T_k = 40, 24, 64
    scores = torch.randn(3, n, T_k, generator=g) * spread
    hidden = masked_keys(start, n, T_k, True, window, 0, "cpu")
    scores.masked_fill_(hidden, float("-inf"))
    alpha = torch.softmax(scores, dim=-1)
    ours = row_stats(alpha, start, hidden, causal=True, scores=scores)["entropy"]
    peer = torch.special.entr(alpha.double()).sum(-1)
    assert torch.allclose(ours.double(), peer, atol=2e-6, rtol=0)
    definition = row_stats(alpha, start, hidden, causal=True)  # without the scores: entr itself
    assert torch.allclose(definition["entropy"].double(), peer, atol=1e-6, rtol=0)


@pytest.mark.parametrize("T_k", [WIDE, 5000, 32768])
def test_top_keys_of_wide_rows_are_topks(T_k):
    """Wide rows (a width not a multiple of the chunk too), causal rows with their later keys 0, ties of equal
    values across chunks, k from 1 to 5: the values are ``topk``'s exactly, each index holds its value."""
    g = torch.Generator().manual_seed(1)
    w = torch.softmax(torch.randn(2, 6, T_k, generator=g) * 4, dim=-1)
    w[:, 1, T_k // 2:] = 0.0  # a row that sees half the keys
    w[:, 2] = (w[:, 2] * 50).round() / 50  # few distinct values: ties everywhere
    w[:, 3, ::700] = 1.0  # equal maxima in many chunks
    for k in range(1, 6):
        values, indices = largest(w, k)
        peer = w.topk(k, dim=-1)
        assert torch.equal(values, peer.values)
        assert torch.equal(w.gather(-1, indices), values)
        assert all(len(set(row)) == k for row in indices.view(-1, k).tolist())  # k distinct keys
