"""A tiny decoder trained live on a toy task (engine/tasks.py), through the one ``attend``.

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
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from collections.abc import Iterator
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from ..kernel import project
from ..kernel.types import AttendOptions, Projections
from ..kernel.attend import attend
from ..base.disk import read_regular, save_safetensors
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


def _have(tensor: torch.Tensor | None) -> torch.Tensor:
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
                          b_o=_have(block.bo)[None])
        return Projections(heads(block.q), heads(block.k), heads(block.v), block.o, **biases)

    def _norm(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return rms_norm(x, weight) if bias is None else F.layer_norm(x, x.shape[-1:], weight, bias, LN_EPS)

    def _mlp(self, y: torch.Tensor, block: Block) -> torch.Tensor:
        if self.shape.mlp == "swiglu":
            return F.silu(y @ _have(block.gate).T) * (y @ block.up.T) @ block.down.T  # (B, T, d)
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


def hf_config(config: TrainConfig) -> dict:
    """config.json of the checkpoint: what LlamaForCausalLM or GPT2LMHeadModel needs to rebuild this model."""
    V, d, P = config.task_obj.vocab_size, config.d_model, config.max_positions
    if config.shape.model_type == "gpt2":
        zero = dict.fromkeys(("resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_first_dropout"), 0.0)
        return {
            "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V, "n_embd": d,
            "n_layer": config.layers, "n_head": config.heads, "n_positions": P, "n_ctx": P,
            "n_inner": config.intermediate, "activation_function": "gelu_new", "layer_norm_epsilon": LN_EPS,
            **zero, "bos_token_id": 0, "eos_token_id": 0, "tie_word_embeddings": True,
            "torch_dtype": "float32", "attn_gui_train": asdict(config),
        }
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": V, "hidden_size": d,
        "intermediate_size": config.intermediate, "num_hidden_layers": config.layers,
        "num_attention_heads": config.heads, "num_key_value_heads": config.heads,
        "head_dim": config.head_dim, "max_position_embeddings": P,
        "rms_norm_eps": RMS_EPS, "rope_theta": ROPE_BASE, "hidden_act": "silu",
        "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
        "torch_dtype": "float32", "attn_gui_train": asdict(config),
    }


def checkpoint_tensors(model: TinyDecoder) -> dict[str, torch.Tensor]:
    """The weights under the checkpoint family's names (GPT-2's Conv1D weights are (in, out),
    its Q, K and V one fused c_attn)."""
    if model.shape.model_type == "gpt2":
        return _gpt2_tensors(model)
    tensors = {"model.embed_tokens.weight": model.embed, "model.norm.weight": model.norm,
               "lm_head.weight": _have(model.head)}
    for i, b in enumerate(model.layers()):
        pre = f"model.layers.{i}."
        tensors.update({
            pre + "input_layernorm.weight": b.norm1, pre + "post_attention_layernorm.weight": b.norm2,
            pre + "self_attn.q_proj.weight": b.q, pre + "self_attn.k_proj.weight": b.k,
            pre + "self_attn.v_proj.weight": b.v, pre + "self_attn.o_proj.weight": b.o,
            pre + "mlp.gate_proj.weight": _have(b.gate), pre + "mlp.up_proj.weight": b.up,
            pre + "mlp.down_proj.weight": b.down,
        })
    return _detached(tensors)


def _gpt2_tensors(model: TinyDecoder) -> dict[str, torch.Tensor]:
    tensors = {"transformer.wte.weight": model.embed, "transformer.wpe.weight": _have(model.positions),
               "transformer.ln_f.weight": model.norm, "transformer.ln_f.bias": _have(model.norm_bias)}
    for i, b in enumerate(model.layers()):
        pre = f"transformer.h.{i}."
        tensors.update({
            pre + "ln_1.weight": b.norm1, pre + "ln_1.bias": _have(b.norm1_bias),
            pre + "ln_2.weight": b.norm2, pre + "ln_2.bias": _have(b.norm2_bias),
            pre + "attn.c_attn.weight": torch.cat([b.q, b.k, b.v]).T,
            pre + "attn.c_attn.bias": torch.cat([_have(b.bq), _have(b.bk), _have(b.bv)]),
            pre + "attn.c_proj.weight": b.o.T, pre + "attn.c_proj.bias": _have(b.bo),
            pre + "mlp.c_fc.weight": b.up.T, pre + "mlp.c_fc.bias": _have(b.b_up),
            pre + "mlp.c_proj.weight": b.down.T, pre + "mlp.c_proj.bias": _have(b.b_down),
        })
    return _detached(tensors)


def _detached(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each tensor as its own contiguous copy, out of the autograd graph (safetensors stores no shared memory)."""
    return {name: t.detach().contiguous().clone() for name, t in tensors.items()}


def tokenizer_json(task: Task) -> str:
    """A WordLevel tokenizer over the task's symbols, split on whitespace ("3 1 4 SEP 3 1 4")."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {name: i for i, name in enumerate(task.token_names())}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=task.token_names()[0]))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tokenizer.to_str()


def save_checkpoint(model: TinyDecoder, folder: str | os.PathLike, step: int = 0,
                    extra: dict[str, str] | None = None) -> Path:
    """Write config.json, model.safetensors, tokenizer.json (and ``extra``: name -> text) into
    ``folder``, whole or not at all."""
    target = Path(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        task = model.config.task_obj
        config = {**hf_config(model.config), "attn_gui_step": step,
                  "attn_gui_task": {"name": task.name, "symbols": task.symbols, "length": task.length}}
        (stage / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        save_safetensors(checkpoint_tensors(model), stage / "model.safetensors", metadata={"format": "pt"})
        (stage / "tokenizer.json").write_text(tokenizer_json(model.config.task_obj))
        for name, text in (extra or {}).items():
            (stage / name).write_text(text)
        _replace_folder(stage, target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return target


def probe_sentence(path: str | os.PathLike) -> str | None:
    """The task's probe sequence as a sentence, for a checkpoint ``save_checkpoint`` wrote at ``path``
    (its config.json names the task); None for any other model, file or folder."""
    try:
        named = json.loads((Path(path) / "config.json").read_text()).get("attn_gui_task")
        task = Task(named["name"], int(named["symbols"]), int(named["length"]))
    except (OSError, ValueError, TypeError, KeyError, AttributeError, ConfigError):
        return None
    return task.sentence(task.probe().inputs[0])


def trained_with(path: str | os.PathLike | None) -> dict | None:
    """How the checkpoint ``save_checkpoint`` wrote at ``path`` was trained (its config.json's "attn_gui_train":
    task, symbols, length, layers, heads, d_model, ...); None for any other model, file or folder."""
    if path is None:
        return None
    try:
        found = json.loads((Path(path) / "config.json").read_text()).get("attn_gui_train")
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    return found if isinstance(found, dict) else None


def check_checkpoint_folder(folder: str | os.PathLike) -> None:
    """Refuse, before any training step, a folder ``save_checkpoint`` could not write (``ConfigError``).

    The checks are those the save would meet: an empty name, the root, a file in the folder's
    place, a folder holding other files, a name too long, and a parent that cannot be written
    (a virtual file system, a path below a file or a device). The parent is tried by creating
    and removing one hidden folder in the nearest folder that exists.
    """
    text = os.fspath(folder)
    if not text.strip():
        raise ConfigError("the checkpoint folder name is empty; name a folder, e.g. --out run1")
    target = Path(os.path.abspath(text))
    if target.parent == target:
        raise ConfigError(f"cannot write a checkpoint as {text}: choose a folder inside it")
    long = [p for p in target.parts if len(os.fsencode(p)) > NAME_MAX - 16]  # room for the hidden stage's name
    if long:
        raise ConfigError(f"cannot write to {text[:60]}...: a name of {len(os.fsencode(long[0])):,} bytes is too "
                          f"long (at most {NAME_MAX - 16} here)")
    if target.exists() or target.is_symlink():
        if not target.is_dir():
            raise ConfigError(f"cannot write a checkpoint to {text}: it is a file, not a folder")
        _check_ours(target, text)
    existing = target.parent
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(f"{existing} is not a folder")
        os.rmdir(tempfile.mkdtemp(prefix=".attn-gui-check.", dir=existing))
    except OSError as exc:
        raise ConfigError(f"cannot write a checkpoint to {text}: {exc.strerror or exc}") from None


CHECKPOINT_FILES = frozenset({"config.json", "model.safetensors", "tokenizer.json", "log.csv"})


def _check_ours(target: Path, text: str) -> None:
    """``ConfigError`` unless the folder ``target`` is empty or a checkpoint ``save_checkpoint`` wrote (its
    config.json has ``attn_gui_train``) holding only the files it writes: a model folder downloaded or
    written by anything else, or a person's file beside a checkpoint, is never replaced."""
    names = sorted(p.name for p in target.iterdir())
    if not names:
        return
    try:
        config = json.loads(read_regular(target / "config.json", 2**20))
        ours = isinstance(config, dict) and isinstance(config.get("attn_gui_train"), dict)
    except (OSError, ValueError, RecursionError):
        ours = False
    if not ours:
        raise ConfigError(f"{text} holds files that are not a checkpoint attn-gui train wrote; choose another folder")
    other = [name for name in names if name not in CHECKPOINT_FILES]
    if other:
        raise ConfigError(f"{text} holds {other[0]!r:.60}, which attn-gui train did not write; choose another "
                          f"folder, or move it out")


def _replace_folder(stage: Path, target: Path) -> None:
    """Put ``stage`` where ``target`` is; an old checkpoint is moved aside first and removed after."""
    if not target.exists():
        os.rename(stage, target)
        return
    _check_ours(target, str(target))
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
    os.rename(target, old / "x")  # the old checkpoint, out of the way in one step
    os.rename(stage, target)
    shutil.rmtree(old, ignore_errors=True)
