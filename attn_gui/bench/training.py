"""Training (issue 22): the app's loop against a plain PyTorch loop, and time to learn induction.

The app trains ``engine.training.TinyDecoder``, written through the engine's one ``attend``
(the whole batch in one call per layer, each sequence attended as alone) so that every step
the explorer draws is the step trained. A plain loop is the same model as a person would write it in PyTorch:
``nn.Linear``
projections, batched matmuls, the causal mask, RoPE. Both take the same batches, loss and
AdamW; the ratio of their step times is the cost of training through ``attend``.
Time to 95 % is the wall time of the app's loop until the induction task's scored half is
predicted at 95 % (mean of the last 10 steps), with the seed and sizes recorded.
"""

from __future__ import annotations

import dataclasses
import math
import time

import torch
import torch.nn.functional as F
from torch import nn

from ..engine.train.model import RMS_EPS, ROPE_BASE, TrainConfig
from ..engine.train.loop import Trainer, loss_and_accuracy
from .settings import BenchSettings
from .timing import Log, Row, Timing

SPEED = TrainConfig(task="induction", layers=2, heads=4, d_model=64, batch=32, length=32)  # the sizes
INDUCTION = TrainConfig(task="induction", symbols=8, length=16, layers=2, heads=2, d_model=32, batch=64, lr=1e-2)
RATIO_TARGET = 1.2  # the app's step time over the plain loop's
LEARN_TARGET_S = 60.0
ACCURACY = 0.95


class PlainDecoder(nn.Module):
    """The app's Llama-shaped decoder written the usual PyTorch way (attention-only or SwiGLU)."""

    def __init__(self, c: TrainConfig):
        super().__init__()
        V, d = c.task_obj.vocab_size, c.d_model
        self.h, self.d_k, self.mlp = c.heads, c.head_dim, c.mlp
        self.embed = nn.Embedding(V, d)
        self.blocks = nn.ModuleList()
        for _ in range(c.layers):
            block = nn.Module()
            block.norm1, block.norm2 = nn.RMSNorm(d, eps=RMS_EPS), nn.RMSNorm(d, eps=RMS_EPS)
            block.qkv = nn.Linear(d, 3 * d, bias=False)
            block.o = nn.Linear(d, d, bias=False)
            if c.mlp:
                block.gate, block.up = nn.Linear(d, 4 * d, bias=False), nn.Linear(d, 4 * d, bias=False)
                block.down = nn.Linear(4 * d, d, bias=False)
            self.blocks.append(block)
        self.norm = nn.RMSNorm(d, eps=RMS_EPS)
        self.head = nn.Linear(d, V, bias=False)
        inv = ROPE_BASE ** (-torch.arange(0, self.d_k, 2, dtype=torch.float32) / self.d_k)
        angles = torch.arange(c.length).float()[:, None] * inv  # (T, d_k/2)
        self.register_buffer("cos", torch.cat([angles.cos()] * 2, -1), persistent=False)
        self.register_buffer("sin", torch.cat([angles.sin()] * 2, -1), persistent=False)

    def rope(self, x: torch.Tensor) -> torch.Tensor:  # (B, h, T, d_k), rotate_half pairing
        T, half = x.shape[-2], self.d_k // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * self.cos[:T] + rotated * self.sin[:T]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        B, T = tokens.shape
        x = self.embed(tokens)  # (B, T, d)
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)
        for block in self.blocks:
            q, k, v = block.qkv(block.norm1(x)).view(B, T, 3, self.h, self.d_k).permute(2, 0, 3, 1, 4)
            scores = self.rope(q) @ self.rope(k).transpose(-2, -1) / math.sqrt(self.d_k)  # (B, h, T, T)
            alpha = scores.masked_fill(causal, float("-inf")).softmax(-1)
            x = x + block.o((alpha @ v).transpose(1, 2).reshape(B, T, -1))
            if self.mlp:
                y = block.norm2(x)
                x = x + block.down(F.silu(block.gate(y)) * block.up(y))
        return self.head(self.norm(x))  # (B, T, V)


def _step_times(steps_by_name: dict, steps: int, warmup: int = 3) -> dict[str, Timing]:
    """Each loop's step times, the loops taking turns step by step (a busy machine slows both alike)."""
    for _ in range(warmup):
        for step in steps_by_name.values():
            step()
    samples: dict[str, list[float]] = {name: [] for name in steps_by_name}
    for _ in range(steps):
        for name, step in steps_by_name.items():
            start = time.perf_counter()
            step()
            samples[name].append((time.perf_counter() - start) * 1e3)
    return {name: Timing(s) for name, s in samples.items()}


def measure_speed(config: TrainConfig, steps: int) -> tuple[Timing, Timing]:
    """Milliseconds per training step: the app's ``Trainer`` and the plain loop, same batches,
    one step of each in turn."""
    trainer = Trainer(config)
    torch.manual_seed(config.seed)
    plain = PlainDecoder(config)
    optimizer = torch.optim.AdamW(plain.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    task, data = config.task_obj, torch.Generator().manual_seed(config.seed + 1)

    def plain_step() -> None:
        batch = task.batch(config.batch, data)
        loss, _ = loss_and_accuracy(plain(batch.inputs), batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    times = _step_times({"app": trainer.step, "plain": plain_step}, steps)
    return times["app"], times["plain"]


def time_to_learn(config: TrainConfig, limit_s: float) -> tuple[float | None, int]:
    """Seconds (and steps) of the app's loop until the mean accuracy of the last 10 steps
    reaches ``ACCURACY``; (None, steps) when ``limit_s`` passes first."""
    trainer = Trainer(config)
    start, accuracies = time.perf_counter(), []
    while time.perf_counter() - start < limit_s:
        accuracies.append(trainer.step().accuracy)
        if len(accuracies) >= 10 and sum(accuracies[-10:]) / 10 >= ACCURACY:
            return time.perf_counter() - start, trainer.steps
    return None, trainer.steps


def bench_training(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """Step time of the app's loop and of the plain loop; time until induction is learned."""
    tiny = settings.mode == "tiny"
    speed = dataclasses.replace(SPEED, batch=4, length=8) if tiny else SPEED
    steps = 3 if tiny else (30 if settings.mode == "quick" else 100)
    size = f"{speed.layers} layers, {speed.heads} heads, d {speed.d_model}, batch {speed.batch}, length {speed.length}"
    log(f"training: {steps} steps of the app's loop and of a plain PyTorch loop ({size}) ...")
    app, plain = measure_speed(speed, steps)
    ratio = app.median_ms / plain.median_ms
    rows = [Row.timed("training", "plain PyTorch loop, one step", size, plain),
            Row.timed("training", "the app's loop (through attend), one step", size, app, ratio=ratio,
                      ratio_to="plain PyTorch loop, one step", target=RATIO_TARGET, met=ratio <= RATIO_TARGET)]
    if tiny:  # the tests' mode: learning takes seconds at the least
        return rows, []
    learn, limit = INDUCTION, 2 * LEARN_TARGET_S
    log(f"training: induction to {ACCURACY:.0%} accuracy (at most {limit:.0f} s) ...")
    seconds, done = time_to_learn(learn, limit)
    label = (f"{learn.layers} layers x {learn.heads} heads, d {learn.d_model}, attention-only, batch {learn.batch}, "
             f"length {learn.length}, {learn.symbols} symbols, seed {learn.seed}")
    reached = f"{done} steps" if seconds is not None else f"not reached in {done} steps"
    rows.append(Row.timed("training", f"wall time to {ACCURACY:.0%} on induction ({reached})", label,
                          Timing([(seconds if seconds is not None else limit) * 1e3]), target=LEARN_TARGET_S * 1e3,
                          met=seconds is not None and seconds <= LEARN_TARGET_S))
    return rows, []
