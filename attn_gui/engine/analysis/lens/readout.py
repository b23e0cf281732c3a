"""Reading a sentence through a lens: each layer's top-k tokens and their p at every position, for the logit lens
(J_l = I) and the Jacobian lens, as TransformerLens 4.3's ``JacobianLens.readout`` reads them.

Layer l is the output of block l (``blocks.{l}.hook_resid_post``). Its lens is
W_U norm(J_l h_l) through the model's own final norm (its own scale at each position) and output transform (Gemma
2's soft-cap c tanh(./c)): ``parts.norm`` and ``parts.logits``, as the engine's logit lens
(``attribution.logit.logit_lens``) reads the residual entering each layer. The last layer is read with the
identity: its lens is the model's own next-token distribution. p is the softmax over the whole vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...base.devices import DTYPES, resolve_device
from ...model.decoder.forward import forward
from ...model.decoder.parts import logits, norm
from ...model.plan import Request, as_plan
from ..attribution.logit import LENS_ROWS
from ..attribution.trace import FINAL
from .artifact import Lens
from .jacobian import hook


@dataclass(frozen=True)
class LensReadout:
    """A sentence read through both lenses.

    Attributes
    ----------
    layers : the layers read (each source layer of the lens, then the last)
    tokens : the sentence's token texts (n)
    ids : its token ids (n)
    logit_tokens, jacobian_tokens : list per layer of list per position of k token texts
    logit_ids, jacobian_ids : (layers, n, k) vocabulary ids
    logit_probs, jacobian_probs : (layers, n, k) p, float64
    """

    layers: list[int]
    tokens: list[str]
    ids: list[int]
    logit_tokens: list[list[list[str]]]
    logit_ids: torch.Tensor
    logit_probs: torch.Tensor
    jacobian_tokens: list[list[list[str]]]
    jacobian_ids: torch.Tensor
    jacobian_probs: torch.Tensor


def _top(x: torch.Tensor, w: dict, shape, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows ``x`` (n, d) of the residual through the final norm, the unembedding and the output transform: the top
    ``k`` p (n, k) float64 and their ids (n, k)."""
    values, indices = [], []
    with torch.no_grad():
        for start in range(0, x.size(0), LENS_ROWS):
            normed = norm(x[start:start + LENS_ROWS], w, FINAL, shape)
            p = torch.softmax(logits(normed, w, shape.final_softcap).double(), -1)  # (rows, V)
            top = p.topk(min(k, p.size(-1)), -1)
            values.append(top.values.cpu())
            indices.append(top.indices.cpu())
    return torch.cat(values), torch.cat(indices)


def read_lens(request: Request, lens: Lens, k: int = 5) -> LensReadout:
    """Read ``request``'s sentence (its model, device and dtype) through the logit lens and ``lens``, which must fit
    the model (``Lens.check``: a lens of another model is refused in one line)."""
    planned = as_plan(request)
    lens.check(planned)
    src = planned.runner("intervene")
    device, dtype = resolve_device(planned.config.device), DTYPES[planned.config.dtype]
    w, shape = src.decoder(device, dtype)
    tokens = src.tokenize(planned.config.sentence)
    ids = list(tokens.token_ids)
    last = shape.layers - 1
    layers = [*lens.source_layers, last]
    with torch.no_grad():
        kept = forward(w, torch.tensor(ids, device=device), shape, keep=True).activations
        assert kept is not None
        read: dict[str, tuple[list[torch.Tensor], list[torch.Tensor]]] = {"logit": ([], []), "jacobian": ([], [])}
        for layer in layers:
            h = kept[hook(layer)].float()  # (n, d)
            moved = h if layer == last else h @ lens.jacobians[layer].to(h.device).T  # J_l h at every position
            for name, x in (("logit", h), ("jacobian", moved)):
                p, i = _top(x.to(kept[hook(layer)].dtype), w, shape, k)
                read[name][0].append(p)
                read[name][1].append(i)
    out = {}
    for name, (probs, indices) in read.items():
        ids_ = torch.stack(indices)
        out[name] = ([[[src.token_text(t) for t in row] for row in layer] for layer in ids_.tolist()], ids_,
                     torch.stack(probs))
    return LensReadout(layers, list(tokens.tokens), ids, *out["logit"], *out["jacobian"])
