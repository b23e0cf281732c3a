"""A fitted Jacobian lens, kept in TransformerLens 4.3's artifact format (``JacobianLens.save`` / ``load``, the
reference implementation's): a ``torch.save`` of {"J": {layer: (d, d)}, "n_prompts", "source_layers", "d_model",
"metadata"}, every value one that ``torch.load(weights_only=True)`` reads. A lens fitted here opens there, and a
published one (Neuronpedia's, float16) opens here.

The metadata says what the lens was fitted on: TransformerLens' fit keys (estimator, corpus, target_layer,
dim_batch, max_seq_len, skip_first_positions, fit_dtype, hook_convention) and ours under ``attn_gui`` (the model's
name, layers, vocabulary and a fingerprint of its final norm and unembedding). ``check`` refuses, in one line, a
lens whose shapes, layers or fingerprint are not the model's.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ...base.errors import UserError
from ...model.decoder.parts import gain, logits
from ...model.plan import Plan
from ...readers.stored import rows
from ..attribution.trace import FINAL

LENS_FILE = "lens.pt"  # in a fit's output folder


class LensError(UserError):
    """A lens file that cannot be read, or that belongs to another model; the message says why."""


@dataclass
class Lens:
    """J_l (d, d) float32 per source layer, the prompts averaged and the provenance (``metadata``)."""

    jacobians: dict[int, torch.Tensor]
    n_prompts: int
    d_model: int
    metadata: dict = field(default_factory=dict)

    @property
    def source_layers(self) -> list[int]:
        return sorted(self.jacobians)

    def save(self, path: str | os.PathLike, dtype: torch.dtype = torch.float32) -> None:
        """Write the artifact (float32 by default: TransformerLens' float16 would round the entries at 1e-3)."""
        payload = {"J": {layer: m.to(dtype) for layer, m in sorted(self.jacobians.items())},
                   "n_prompts": self.n_prompts, "source_layers": self.source_layers, "d_model": self.d_model,
                   "metadata": self.metadata}
        torch.save(payload, str(path))

    def check(self, model: Plan) -> Lens:
        """``LensError`` in one line unless this lens fits ``model``: its width, its layers (each below the last,
        the target the last), and, where the lens says, the model's layers, vocabulary and fingerprint."""
        spec = model.facts
        name = spec.label
        if self.d_model != spec.d_model:
            raise LensError(f"the lens is {self.d_model} wide and {name} {spec.d_model}: it belongs to another model")
        wrong = [layer for layer in self.source_layers if not 0 <= layer < spec.layers - 1]
        if wrong:
            raise LensError(f"the lens has layer {wrong[0]}, not a layer below the last of {name} (0 to "
                            f"{spec.layers - 2}): it belongs to another model")
        target = self.metadata.get("target_layer", spec.layers - 1)
        if target != spec.layers - 1:
            raise LensError(f"the lens maps to layer {target}, not the last of {name} ({spec.layers - 1})")
        ours = self.metadata.get("attn_gui")
        if isinstance(ours, dict) and "fingerprint" in ours:
            here = identity(model)
            if ours.get("layers") != here["layers"] or ours.get("vocab") != here["vocab"] or \
                    ours["fingerprint"] != here["fingerprint"]:
                raise LensError(f"the lens was fitted on {ours.get('model')}, whose weights are not those of {name}")
        return self


def identity(model: Plan) -> dict:
    """What a lens records of its model: name, layers, vocabulary size and a SHA-256 of the final norm's gain and
    the unembedding's first and last rows (float32), which a copy or a move of the model keeps."""
    spec = model.facts
    w, shape = model.runner("intervene").decoder("cpu", torch.float32)
    key = "lm_head.weight" if "lm_head.weight" in w else "model.embed_tokens.weight"
    vocab = int(logits(torch.zeros(1, spec.d_model), w).shape[-1])  # the unembedding's rows
    digest = hashlib.sha256()
    for t in (gain(w, FINAL, shape), rows(w, key, torch.tensor([0, vocab - 1]))):
        digest.update(t.detach().to(torch.float32).contiguous().cpu().numpy().tobytes())
    return {"model": model.config.model, "layers": spec.layers, "vocab": vocab, "fingerprint": digest.hexdigest()}


def load(path: str | os.PathLike) -> Lens:
    """A lens artifact (``J``) or a reference fit checkpoint (``jacobian_sum`` / ``n_done``, divided here), read with
    ``weights_only=True``; a folder means its ``lens.pt``. ``LensError`` in one line for anything else."""
    p = Path(path)
    if p.is_dir():
        p = p / LENS_FILE
    try:
        payload = torch.load(str(p), map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise LensError(f"no lens at {p}") from None
    except (OSError, RuntimeError, EOFError, ValueError, KeyError, pickle.UnpicklingError) as exc:
        said = (str(exc).splitlines() or [""])[0]
        raise LensError(f"{p} is not a lens torch.load can read safely ({said[:80] or type(exc).__name__})") from None
    if not isinstance(payload, dict) or not ({"J", "jacobian_sum"} & set(payload)):
        raise LensError(f"{p} is not a Jacobian lens (no J or jacobian_sum)")
    try:
        if "J" in payload:
            jacobians = {int(layer): m.float() for layer, m in payload["J"].items()}
            n, meta = int(payload.get("n_prompts", 0)), dict(payload.get("metadata") or {})
        else:
            n = int(payload.get("n_done", payload.get("n_prompts")) or 0)
            if n <= 0:
                raise LensError(f"{p} is a fit checkpoint of {n} prompts")
            jacobians = {int(layer): m.float() / n for layer, m in payload["jacobian_sum"].items()}
            meta = {"target_layer": payload["target_layer"]} if "target_layer" in payload else {}
        d = int(payload["d_model"]) if "d_model" in payload else next(iter(jacobians.values())).shape[0]
    except (TypeError, ValueError, AttributeError, KeyError, StopIteration) as exc:
        raise LensError(f"{p} is not a Jacobian lens ({type(exc).__name__})") from None
    bad = [layer for layer, m in jacobians.items() if tuple(m.shape) != (d, d) or not torch.isfinite(m).all()]
    if not jacobians or bad:
        raise LensError(f"{p}: layer {bad[0] if bad else '(none)'} is not a finite {d} x {d} matrix")
    return Lens(jacobians, n, d, meta)
