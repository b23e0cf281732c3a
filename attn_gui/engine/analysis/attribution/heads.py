"""Head detectors: previous-token, duplicate-token, induction and sink scores per head, and a label."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...model.plan import Request
from .trace import Trace, trace


DETECTORS = ("previous-token", "duplicate-token", "induction", "sink")


THRESHOLD = 0.4  # a head is labelled with its highest score at or above this


@dataclass(frozen=True)
class Detection:
    """Each detector's score per head (L, h) on the current input, and each head's label ("" for none)."""

    scores: dict[str, torch.Tensor]
    labels: list[list[str]]


def detector_scores(weights: torch.Tensor, ids: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """The detectors' scores of attention weights (L, h, n, n) on tokens ``ids``, (L, h) each; NaN where no row
    of the input qualifies. Each is the mean, over the qualifying query rows i, of the weight on the keys j:

    - previous-token: j = i - 1 (rows i >= 1);
    - duplicate-token: every earlier j with the same token as i (rows with one);
    - induction: every j >= 1 whose previous token equals token i, j - 1 < i (the token after an earlier copy);
    - sink: j = 0, the first token (rows i >= 1).
    """
    n = len(ids)
    tok = torch.tensor(ids)
    before = torch.arange(n)[None, :] < torch.arange(n)[:, None]  # (n, n): j < i
    patterns = {
        "previous-token": torch.diag(torch.ones(n - 1, dtype=torch.bool), -1),
        "duplicate-token": (tok[:, None] == tok[None, :]) & before,
        "induction": torch.zeros(n, n, dtype=torch.bool),
        "sink": torch.zeros(n, n, dtype=torch.bool),
    }
    patterns["induction"][:, 1:] = (tok[:, None] == tok[None, :-1]) & before[:, :-1]  # token j - 1 = token i
    patterns["sink"][1:, 0] = True
    a = weights.double().cpu()
    out = {}
    for name, pattern in patterns.items():
        qualify = pattern.any(-1)  # (n,)
        if not qualify.any():
            out[name] = torch.full(a.shape[:2], float("nan"), dtype=torch.float64)
            continue
        out[name] = (a * pattern).sum(-1)[..., qualify].mean(-1)
    return out


def detect_heads(request: Request, traced: Trace | None = None) -> Detection:
    """Score every head of ``config``'s model on its sentence (``detector_scores``) and label it with the detector
    it scores highest on, if that score reaches ``THRESHOLD``."""
    t = traced or trace(request)
    scores = detector_scores(t.weights, t.ids)
    stacked = torch.stack([scores[name].nan_to_num(-1.0) for name in DETECTORS])  # (4, L, h)
    best, which = stacked.max(0)
    labels = [[DETECTORS[int(k)] if float(v) >= THRESHOLD else "" for v, k in zip(row_v, row_k, strict=True)]
              for row_v, row_k in zip(best, which, strict=True)]
    return Detection(scores, labels)
