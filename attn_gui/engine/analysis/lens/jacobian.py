"""The Jacobian lens's estimator (Gurnee et al., "Verbalizable Representations Form a Global Workspace in Language
Models", Transformer Circuits Thread, 2026), as TransformerLens 4.3's ``JacobianLens.fit`` computes it:

    J_l = E_prompt[ (1/|V|) sum_{t in V} sum_{t' in V, t' >= t} d h_final,t' / d h_l,t ]

h_l is the output of block l (``blocks.{l}.hook_resid_post``, TransformerLens' bridge names it ``hook_out``),
h_final the last block's output before the final norm, V the positions from ``skip_first_positions`` to the one
before the last. Per prompt: one forward of the prompt repeated ``dim_batch`` times, then ceil(d / dim_batch)
backward passes, each planting a one-hot cotangent for one output dimension per batch row at every position of
V at once (causal attention makes the gradient at t the sum over t' >= t); the rows are averaged over the source
positions of V. A prompt of n <= skip_first_positions + 1 tokens has no position and is skipped, not counted.

A shard's result is a sum over its prompts and a count (``LensSums``): shards reduced in order give the same
matrices wherever they were computed (in process or on Ray).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ...base.devices import DTYPES, resolve_device
from ...base.errors import UserError
from ...config.config import AttentionConfig
from ...model.decoder.forward import forward
from ...model.plan import Plan, plan
from ...specs.decoder import LlamaShape
from ..corpus.read import CorpusError, read_passage

DIM_BATCH, MAX_SEQ_LEN, SKIP_FIRST = 8, 128, 16  # TransformerLens 4.3's defaults


def hook(layer: int) -> str:
    """The forward's hook point for the output of block ``layer``."""
    return f"blocks.{layer}.hook_resid_post"


@dataclass(frozen=True)
class LensSettings:
    """What a fit computes: the model, TransformerLens' options, the source layers (None: every layer below the
    last) and the prompts per shard. Two fits with equal settings over the same corpus share shards."""

    model: str
    dim_batch: int = DIM_BATCH
    max_seq_len: int = MAX_SEQ_LEN
    skip_first_positions: int = SKIP_FIRST
    source_layers: tuple[int, ...] | None = None
    shard_size: int = 8
    dtype: str = "float32"
    device: str = "cpu"

    def __post_init__(self):
        if not 1 <= self.dim_batch <= 65_536:
            raise CorpusError(f"--dim-batch must be 1 to 65536; got {self.dim_batch}")
        if not 2 <= self.max_seq_len <= 1_000_000:
            raise CorpusError(f"--max-seq-len must be 2 to 1000000; got {self.max_seq_len}")
        if not 0 <= self.skip_first_positions <= self.max_seq_len - 2:
            raise CorpusError(f"--skip-first must be 0 to --max-seq-len - 2 ({self.max_seq_len - 2}); got "
                              f"{self.skip_first_positions}: no position would be left")
        if not 1 <= self.shard_size <= 100_000:
            raise CorpusError(f"--shard-size must be 1 to 100000; got {self.shard_size}")

    @functools.cached_property
    def model_plan(self) -> Plan:
        """The model's plan, made once."""
        return plan(AttentionConfig(model=self.model, dtype=self.dtype, device=self.device))

    @property
    def layers(self) -> tuple[int, ...]:
        """The source layers, checked against the model (``CorpusError`` in one line)."""
        n = self.model_plan.facts.layers
        if n < 2:
            raise CorpusError(f"{self.model} has {n} layer: a Jacobian lens maps a layer to the last, so it needs 2 "
                              f"or more")
        if self.source_layers is None:
            return tuple(range(n - 1))
        wrong = [layer for layer in self.source_layers if not 0 <= layer < n - 1]
        if wrong or not self.source_layers:
            raise CorpusError(f"--layers must be 0 to {n - 2} (every layer below the last, {n - 1}); got "
                              f"{', '.join(map(str, wrong)) or 'none'}")
        return tuple(sorted(set(self.source_layers)))

    def decoder(self) -> tuple[dict, LlamaShape]:
        """The weights and shape as the plan runs them (bfloat16 matmuls on the stored weights where it says so)."""
        p = self.model_plan
        return p.runner("intervene").decoder(resolve_device(p.config.device), DTYPES[p.config.dtype])


def prompt_jacobian(w: dict, shape: LlamaShape, ids: Sequence[int], layers: Sequence[int], dim_batch: int,
                    skip_first: int) -> dict[int, torch.Tensor]:
    """One prompt's J_l (d, d) for every source layer of ``layers``, rows the final output's dimensions (float32,
    on the CPU); the prompt must have a position (len(ids) > skip_first + 1)."""
    n, last = len(ids), shape.layers - 1
    valid = torch.arange(skip_first, n - 1)  # V
    tokens = torch.tensor(list(ids), device=_device(w)).expand(dim_batch, n)  # (B, n): the prompt B times

    def root(x: torch.Tensor) -> torch.Tensor:  # the graph starts at the earliest source (the weights need none)
        return x.detach().requires_grad_(True)

    with torch.enable_grad():
        kept = forward(w, tokens, shape, hooks={hook(min(layers)): root}, keep=True).activations
        assert kept is not None
        target = kept[hook(last)]  # (B, n, d)
        d = target.shape[-1]
        sources = [kept[hook(layer)] for layer in layers]
        out = {layer: torch.zeros(d, d) for layer in layers}
        batch = torch.arange(dim_batch, device=target.device)
        cotangent = torch.zeros_like(target)
        passes = -(-d // dim_batch)
        for i in range(passes):
            start = i * dim_batch
            k = min(dim_batch, d - start)
            cotangent.zero_()
            cotangent[batch[:k, None], valid[None, :].to(target.device), start + batch[:k, None]] = 1.0
            grads = _grad(target, sources, cotangent, retain_graph=i < passes - 1)
            for layer, g in zip(layers, grads, strict=True):  # g (B, n, d): row start + b of J_l in batch row b
                out[layer][start:start + k] = g[:k, valid.to(g.device)].float().mean(1).cpu()
    return out


def _grad(target: torch.Tensor, sources: list[torch.Tensor], cotangent: torch.Tensor, retain_graph: bool):
    """``torch.autograd.grad``; ``CorpusError`` in one line where a matmul has no derivative (the int4 kernel that
    runs a 4-bit GGUF's bfloat16 matmuls packed)."""
    try:
        return torch.autograd.grad(target, sources, cotangent, retain_graph=retain_graph)
    except RuntimeError as exc:
        if "derivative for" not in str(exc) or "not implemented" not in str(exc):
            raise
        raise CorpusError("the Jacobian lens needs the gradient of every matmul, and PyTorch's int4 kernel (this "
                          "file's packed bfloat16 matmuls) has none: fit with --dtype float32") from None


def _device(w) -> torch.device:
    device = getattr(w, "device", None)
    return torch.device(device) if device is not None else next(iter(w.values())).device


@dataclass
class LensSums:
    """One shard's (or, reduced, the corpus's) sum of per-prompt J_l and the prompts counted."""

    passages: int = 0
    prompts: int = 0  # counted: long enough to have a position
    skipped: int = 0  # too short
    tokens: int = 0
    sums: dict[int, np.ndarray] = field(default_factory=dict)  # layer -> (d, d) float64

    def add(self, other: LensSums) -> None:
        self.passages += other.passages
        self.prompts += other.prompts
        self.skipped += other.skipped
        self.tokens += other.tokens
        for layer, s in other.sums.items():
            self.sums[layer] = self.sums[layer] + s if layer in self.sums else s.copy()

    def plain(self) -> dict:
        return {"passages": self.passages, "prompts": self.prompts, "skipped": self.skipped, "tokens": self.tokens,
                "sums": {str(layer): s for layer, s in self.sums.items()}}

    @classmethod
    def from_plain(cls, data: dict) -> LensSums:
        """``plain``'s data back; ``CorpusError`` for a worker's error."""
        if "error" in data:
            raise CorpusError(data["error"])
        return cls(data["passages"], data["prompts"], data["skipped"], data["tokens"],
                   {int(layer): s for layer, s in data["sums"].items()})


class LensWorker:
    """Holds the model once and turns shards of passages into ``LensSums`` (in process, or as a Ray actor)."""

    def __init__(self, settings: LensSettings, threads: int | None = None):
        if threads is not None:
            torch.set_num_threads(threads)
        self.settings = settings
        self.layers = settings.layers
        self.model = settings.model_plan.runner("intervene")
        self.model.load()

    def pid(self) -> int:
        return os.getpid()

    def run(self, start: int, passages: Sequence[str]) -> dict:
        """``shard`` as plain data for Ray, or {"error": message} for a UserError."""
        try:
            return self.shard(start, passages).plain()
        except UserError as exc:
            return {"error": str(exc)}

    def shard(self, start: int, passages: Sequence[str]) -> LensSums:
        """The sums over ``passages`` (the corpus's from ``start``), each read to ``max_seq_len`` tokens."""
        s = self.settings
        w, shape = s.decoder()
        d = s.model_plan.facts.d_model
        total = LensSums(sums={layer: np.zeros((d, d)) for layer in self.layers})
        for text in passages:
            total.passages += 1
            ids = read_passage(self.model, text, s.max_seq_len).ids
            if len(ids) <= s.skip_first_positions + 1:
                total.skipped += 1
                continue
            total.prompts += 1
            total.tokens += len(ids)
            for layer, j in prompt_jacobian(w, shape, ids, self.layers, s.dim_batch, s.skip_first_positions).items():
                total.sums[layer] += j.double().numpy()
        return total
