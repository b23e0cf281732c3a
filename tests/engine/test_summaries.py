"""``summaries.row_stats``' entropy read from the scores, against −Σ α ln α (``torch.special.entr``) of their softmax.

A run takes each block's entropy from the scores the softmax read (ln Σ e^s − Σ α s); the peer is the definition,
torch's ``entr`` summed over the keys of ``torch.softmax`` of the same scores.
"""

import pytest
import torch

from attn_gui.engine.attention import masked_keys
from attn_gui.engine.summaries import row_stats


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
