"""A tiny decoder trained live on a toy task (train/tasks.py), through the one ``attend``.

Two shapes, each what a transformers class computes, so a checkpoint is a Hugging Face folder
of a standard model_type (``SHAPES``, chosen by ``TrainConfig.positions``):

- "rope" (model_type "llama", ``LlamaForCausalLM``): token embedding, per layer RMSNorm ->
  causal multi-head attention with RoPE -> residual, RMSNorm -> SwiGLU MLP -> residual, a final
  RMSNorm and an untied output head.
- "learned" (model_type "gpt2", ``GPT2LMHeadModel``): token plus learned position embedding,
  per layer LayerNorm -> causal attention with biases -> residual, LayerNorm -> GELU (tanh)
  MLP with biases -> residual, a final LayerNorm and the output head tied to the embedding.

Attention-only (no MLP) is saved as zero MLP weights (and biases), which both compute as
exactly 0. Training is AdamW on the cross-entropy of the scored positions, one record per step.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from ..kernel import project
from ..kernel.types import AttendOptions, Projections
from ..kernel.attend import attend
from ..base.errors import ConfigError
from .tasks import Task


ROPE_BASE = 10000.0


RMS_EPS = 1e-5


LN_EPS = 1e-5  # GPT-2's layer_norm_epsilon


@dataclass(frozen=True)
class Shape:
    """What one checkpoint family changes on the one decoder path."""

    model_type: str
    norm: str  # "rms" (a gain) or "layer" (a gain and a bias)
    rope: bool  # RoPE on q and k; else a learned position embedding added to the tokens'
    mlp: str  # "swiglu" (gate, up, down) or "gelu" (up, down; tanh GELU, GPT-2's "gelu_new")
    bias: bool  # biases on the attention's and the MLP's projections
    tied: bool  # the output head is the token embedding


SHAPES = {"rope": Shape("llama", "rms", rope=True, mlp="swiglu", bias=False, tied=False),
          "learned": Shape("gpt2", "layer", rope=False, mlp="gelu", bias=True, tied=True)}


SEED_MAX = 2**63 - 2  # the batches' generator is seeded with seed + 1, within torch's signed 64 bits


NAME_MAX = 255  # bytes in one name on Linux, macOS and Windows' file systems


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a run: the task, the model's sizes, the optimiser and the seed."""

    task: str = "induction"
    symbols: int = 16
    length: int = 32
    layers: int = 2
    heads: int = 4
    d_model: int = 64
    mlp: bool = False
    batch: int = 32
    lr: float = 3e-3
    weight_decay: float = 0.0
    seed: int = 0
    positions: str = "rope"  # "rope" (a Llama) or "learned" (a GPT-2): SHAPES

    def __post_init__(self):
        Task(self.task, self.symbols, self.length)  # checks the task and its sizes
        if self.positions not in SHAPES:
            raise ConfigError(f"positions must be one of {', '.join(SHAPES)}, not {self.positions!r}")
        checks = [("layers", 1, 4), ("heads", 1, 8), ("d_model", 16, 256), ("batch", 1, 4096)]
        for name, low, high in checks:
            value = getattr(self, name)
            if not low <= value <= high:
                raise ConfigError(f"{name.replace('_', '-')} must be {low} to {high}, not {value}")
        if self.d_model % self.heads:
            raise ConfigError(f"d-model {self.d_model} must split into {self.heads} heads of one size")
        if self.shape.rope and (self.d_model // self.heads) % 2:
            raise ConfigError(f"d-model {self.d_model} must split into {self.heads} heads of an even size (RoPE)")
        if not (0 < self.lr <= 1) or not math.isfinite(self.lr):
            raise ConfigError(f"learning rate must be in (0, 1], not {self.lr}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= SEED_MAX:
            raise ConfigError(f"seed must be 0 to {SEED_MAX}, not {str(self.seed)[:40]}")  # torch.Generator's range

    @property
    def task_obj(self) -> Task:
        return Task(self.task, self.symbols, self.length)

    @property
    def shape(self) -> Shape:
        return SHAPES[self.positions]

    @property
    def max_positions(self) -> int:
        """The checkpoint's position count: the task's sequences and sentences up to 64 tokens."""
        return max(64, self.length)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def intermediate(self) -> int:
        """The MLP's hidden size: 4 d, or 1 for attention-only (a zero MLP in the checkpoint)."""
        return 4 * self.d_model if self.mlp else 1


rms_norm = functools.partial(project.rms_norm, eps=RMS_EPS)  # Llama's RMSNorm at the checkpoint's eps


class Block(nn.Module):
    """One layer's parameters, named as Llama's; None where the family has no such tensor."""

    norm1: nn.Parameter
    norm1_bias: nn.Parameter | None  # LayerNorm's (GPT-2); RMSNorm has none
    q: nn.Parameter
    k: nn.Parameter
    v: nn.Parameter
    o: nn.Parameter
    bq: nn.Parameter | None
    bk: nn.Parameter | None
    bv: nn.Parameter | None
    bo: nn.Parameter | None
    norm2: nn.Parameter
    norm2_bias: nn.Parameter | None
    gate: nn.Parameter | None  # SwiGLU's only
    up: nn.Parameter
    down: nn.Parameter
    b_up: nn.Parameter | None
    b_down: nn.Parameter | None


def have(tensor: torch.Tensor | None) -> torch.Tensor:
    """A tensor the family's Shape is known to set (a bias, the gate, the head or the positions)."""
    assert tensor is not None, "the family's Shape sets this tensor"
    return tensor


class TinyDecoder(nn.Module):
    """The decoder, its parameters named and shaped as Llama's (q_proj (h*d_k, d), ...) whatever
    the checkpoint's family; a GPT-2 checkpoint fuses and transposes them as it is written."""

    def __init__(self, config: TrainConfig, generator: torch.Generator):
        super().__init__()
        self.config = c = config
        self.shape = shape = c.shape
        V, d, f = c.task_obj.vocab_size, c.d_model, c.intermediate
        draw = lambda *shape: nn.Parameter(torch.randn(*shape, generator=generator) * 0.02)  # noqa: E731
        zero = lambda *shape, grad=True: nn.Parameter(torch.zeros(*shape), requires_grad=grad)  # noqa: E731
        norm = lambda: (nn.Parameter(torch.ones(d)), zero(d) if shape.norm == "layer" else None)  # noqa: E731
        self.embed = draw(V, d)
        self.positions = None if shape.rope else draw(c.max_positions, d)
        self.blocks = nn.ModuleList()
        for _ in range(c.layers):
            block = Block()
            block.norm1, block.norm1_bias = norm()
            block.q, block.k, block.v, block.o = draw(d, d), draw(d, d), draw(d, d), draw(d, d)
            block.bq, block.bk, block.bv, block.bo = (zero(d), zero(d), zero(d), zero(d)) if shape.bias else \
                (None,) * 4
            block.norm2, block.norm2_bias = norm()
            names = ("gate", "up", "down") if shape.mlp == "swiglu" else ("up", "down")
            shapes = dict(gate=(f, d), up=(f, d), down=(d, f))
            block.gate = None
            for name in names:
                setattr(block, name, draw(*shapes[name]) if c.mlp else zero(*shapes[name], grad=False))
            block.b_up, block.b_down = (zero(f, grad=c.mlp), zero(d, grad=c.mlp)) if shape.bias else (None, None)
            self.blocks.append(block)
        self.norm, self.norm_bias = norm()
        self.head = None if shape.tied else draw(V, d)
        # every layer's attention: causal, column layout (q = W x), RoPE where the shape has it
        self.attend_options = AttendOptions(layout="column", causal=True, rope_base=ROPE_BASE if shape.rope else None)

    def layers(self) -> list[Block]:
        """The blocks, typed (an nn.ModuleList yields plain Modules)."""
        return [cast(Block, block) for block in self.blocks]

    def projections(self, block: Block) -> Projections:
        """One layer's attention weights in the engine's column layout (views, no copy)."""
        h, d_k, d = self.config.heads, self.config.head_dim, self.config.d_model
        heads = lambda w: w.view(h, d_k, d)  # noqa: E731  # (h*d_k, d) -> (h, d_k, d): head i's rows
        biases = {}
        if self.shape.bias:
            per_head = lambda b: b.view(h, 1, d_k)  # noqa: E731
            biases = dict(b_q=per_head(block.bq), b_k=per_head(block.bk), b_v=per_head(block.bv),
                          b_o=have(block.bo)[None])
        return Projections(heads(block.q), heads(block.k), heads(block.v), block.o, **biases)

    def _norm(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return rms_norm(x, weight) if bias is None else F.layer_norm(x, x.shape[-1:], weight, bias, LN_EPS)

    def _mlp(self, y: torch.Tensor, block: Block) -> torch.Tensor:
        if self.shape.mlp == "swiglu":
            return F.silu(y @ have(block.gate).T) * (y @ block.up.T) @ block.down.T  # (B, T, d)
        return F.linear(F.gelu(F.linear(y, block.up, block.b_up), approximate="tanh"), block.down, block.b_down)

    def forward(self, inputs: torch.Tensor, keep_weights: bool = False):
        """Logits (B, T, V) of the tokens ``inputs`` (B, T); with ``keep_weights`` also alpha (L, B, h, T, T)."""
        x = self.embed[inputs]  # (B, T, d)
        if self.positions is not None:
            x = x + self.positions[:inputs.size(-1)]
        alphas = []
        for block in self.layers():
            steps = attend(self._norm(x, block.norm1, block.norm1_bias), self.projections(block),
                           self.attend_options)  # the whole batch at once: each sequence's attend
            x = x + steps.output  # (B, T, d)
            alphas.append(steps.alpha)  # (B, h, T, T)
            if self.config.mlp:
                x = x + self._mlp(self._norm(x, block.norm2, block.norm2_bias), block)
        head = self.embed if self.head is None else self.head
        logits = self._norm(x, self.norm, self.norm_bias) @ head.T  # (B, T, V)
        return (logits, torch.stack(alphas)) if keep_weights else logits
