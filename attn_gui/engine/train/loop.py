"""Training the tiny decoder: the app's own AdamW, one ``Record`` per step (``Trainer``), the loss, the log as CSV
and the heads' scores on a batch."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from .model import TrainConfig, TinyDecoder
from .checkpoint import save_checkpoint


def loss_and_accuracy(logits: torch.Tensor, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy and the share of argmax hits over the scored positions."""
    scored_logits = logits[batch.scored]  # (N, V)
    targets = batch.targets[batch.scored]  # (N,)
    loss = F.cross_entropy(scored_logits, targets)
    return loss, (scored_logits.argmax(-1) == targets).float().mean()


@dataclass(frozen=True)
class Record:
    """One training step: its number (from 1), the loss and accuracy of its batch, seconds since the start."""

    step: int
    loss: float
    accuracy: float
    time: float


class Trainer:
    """A seeded training run driven one step at a time: ``step()``, ``run(n)``, ``reset()``.

    Pausing is not calling ``step`` (the state stays); resuming is calling it again.
    The model's initial weights and the batches come from two CPU generators seeded by
    ``config.seed``, so a run is the same on every device and after every reset.
    """

    def __init__(self, config: TrainConfig):
        self.config = config
        self.reset()

    def reset(self) -> None:
        """Back to step 0: fresh weights, optimiser and batches from the seed."""
        c = self.config
        self.task = c.task_obj
        self.model = TinyDecoder(c, torch.Generator().manual_seed(c.seed))
        self.data = torch.Generator().manual_seed(c.seed + 1)
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = AdamW(trainable, lr=c.lr, weight_decay=c.weight_decay)
        self.steps, self.elapsed = 0, 0.0
        self.records: list[Record] = []

    def step(self) -> Record:
        """One AdamW step on a fresh batch."""
        start = time.perf_counter()
        batch = self.task.batch(self.config.batch, self.data)
        loss, accuracy = loss_and_accuracy(self.model(batch.inputs), batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.steps += 1
        self.elapsed += time.perf_counter() - start
        record = Record(self.steps, loss.item(), accuracy.item(), self.elapsed)
        self.records.append(record)
        return record

    def run(self, steps: int) -> Iterator[Record]:
        """``steps`` more steps, one record each (stop iterating to pause)."""
        for _ in range(steps):
            yield self.step()

    @torch.no_grad()
    def probe(self):
        """The probe batch (one sequence) and every head's alpha on it (L, h, T, T)."""
        batch = self.task.probe()
        _, alphas = self.model(batch.inputs, keep_weights=True)
        return batch, alphas[:, 0]

    def save(self, folder: str | os.PathLike, log: bool = False) -> Path:
        """Write the checkpoint, a Hugging Face folder (Llama or GPT-2), atomically (a temp folder, then a rename);
        with ``log`` also log.csv, the records so far."""
        extra = {"log.csv": log_csv(self.records)} if log else {}
        return save_checkpoint(self.model, folder, step=self.steps, extra=extra)


class AdamW:
    """``torch.optim.AdamW``'s update, as its single-tensor path computes it (the CPU's), op for op.

    Written out because building ``torch.optim.AdamW`` imports ``torch._dynamo`` (about a
    second), which on the Train dock's worker held Python's lock for a 110-160 ms stall of the
    window at Start. Tested equal to torch's, bit for bit, over many steps.
    """

    def __init__(self, params, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        self.params = list(params)
        self.lr, (self.beta1, self.beta2), self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = 0

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.steps += 1
        correction1 = 1 - self.beta1 ** self.steps
        step_size = self.lr / correction1
        correction2_sqrt = (1 - self.beta2 ** self.steps) ** 0.5
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True):
            if p.grad is None:
                continue
            p.mul_(1 - self.lr * self.weight_decay)
            m.lerp_(p.grad, 1 - self.beta1)
            v.mul_(self.beta2).addcmul_(p.grad, p.grad, value=1 - self.beta2)
            p.addcdiv_(m, (v.sqrt() / correction2_sqrt).add_(self.eps), value=-step_size)


def log_csv(records: list[Record]) -> str:
    """step,loss,accuracy,time: one line per record."""
    lines = ["step,loss,accuracy,time"] + [f"{r.step},{r.loss:.9g},{r.accuracy:.6g},{r.time:.4f}" for r in records]
    return "\n".join(lines) + "\n"


def head_scores(alphas: torch.Tensor, batch) -> dict[str, torch.Tensor]:
    """The previous-token and induction score of every head, (L, h) each.

    ``alphas`` (L, h, T, T) are one sequence's (``batch``, the probe). previous: mean
    alpha_i,i-1 over rows i >= 1 (0-based); induction (the induction task alone, else NaN):
    mean alpha from each second-copy token i to i - m + 1, the token after its earlier copy
    (m the probe's period).
    """
    T = alphas.size(-1)
    i = torch.arange(1, T)
    previous = alphas[..., i, i - 1].mean(-1)
    if batch.period is None:
        return dict(previous=previous, induction=torch.full_like(previous, float("nan")))
    m = int(batch.period[0])
    rows = torch.arange(T + 1 - m, T)  # the second copy's inputs (the sequence is T + 1 long)
    return dict(previous=previous, induction=alphas[..., rows, rows - m + 1].mean(-1))
