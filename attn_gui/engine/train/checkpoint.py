"""A trained decoder saved as a Hugging Face folder (config.json, model.safetensors, tokenizer.json, log.csv) of a
standard model_type, and what the app reads back of one of ours."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
import uuid
from dataclasses import asdict
from pathlib import Path

import torch

from ..base.disk import read_regular, save_safetensors
from ..base.errors import ConfigError
from .tasks import Task
from .model import ROPE_BASE, RMS_EPS, LN_EPS, NAME_MAX, TrainConfig, have, TinyDecoder


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
               "lm_head.weight": have(model.head)}
    for i, b in enumerate(model.layers()):
        pre = f"model.layers.{i}."
        tensors.update({
            pre + "input_layernorm.weight": b.norm1, pre + "post_attention_layernorm.weight": b.norm2,
            pre + "self_attn.q_proj.weight": b.q, pre + "self_attn.k_proj.weight": b.k,
            pre + "self_attn.v_proj.weight": b.v, pre + "self_attn.o_proj.weight": b.o,
            pre + "mlp.gate_proj.weight": have(b.gate), pre + "mlp.up_proj.weight": b.up,
            pre + "mlp.down_proj.weight": b.down,
        })
    return _detached(tensors)


def _gpt2_tensors(model: TinyDecoder) -> dict[str, torch.Tensor]:
    tensors = {"transformer.wte.weight": model.embed, "transformer.wpe.weight": have(model.positions),
               "transformer.ln_f.weight": model.norm, "transformer.ln_f.bias": have(model.norm_bias)}
    for i, b in enumerate(model.layers()):
        pre = f"transformer.h.{i}."
        tensors.update({
            pre + "ln_1.weight": b.norm1, pre + "ln_1.bias": have(b.norm1_bias),
            pre + "ln_2.weight": b.norm2, pre + "ln_2.bias": have(b.norm2_bias),
            pre + "attn.c_attn.weight": torch.cat([b.q, b.k, b.v]).T,
            pre + "attn.c_attn.bias": torch.cat([have(b.bq), have(b.bk), have(b.bv)]),
            pre + "attn.c_proj.weight": b.o.T, pre + "attn.c_proj.bias": have(b.bo),
            pre + "mlp.c_fc.weight": b.up.T, pre + "mlp.c_fc.bias": have(b.b_up),
            pre + "mlp.c_proj.weight": b.down.T, pre + "mlp.c_proj.bias": have(b.b_down),
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
    """Put ``stage`` where ``target`` is; an old checkpoint is moved aside first and removed after. A target that
    cannot be renamed (a mount point, such as a Docker ``-v`` folder) is written into instead (``_move_in``)."""
    if not target.exists():
        os.rename(stage, target)
        return
    _check_ours(target, str(target))
    if not os.path.ismount(target):
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
        try:
            os.rename(target, old / "x")  # the old checkpoint, out of the way in one step
        except OSError as exc:
            os.rmdir(old)
            if exc.errno not in (errno.EBUSY, errno.EXDEV, errno.EPERM):
                raise
        else:
            os.rename(stage, target)
            shutil.rmtree(old, ignore_errors=True)
            return
    _move_in(stage, target)


def _move_in(stage: Path, target: Path) -> None:
    """Move the checkpoint's files into ``target`` one by one (config.json, which marks it ours, last; across file
    systems by a copy renamed into place); the old checkpoint's files the new one lacks are removed, nothing else."""
    names = sorted(p.name for p in stage.iterdir())
    for name in sorted(names, key=lambda n: n == "config.json"):
        try:
            os.replace(stage / name, target / name)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            tmp = target / f".{name}.{uuid.uuid4().hex[:8]}.tmp"
            shutil.copyfile(stage / name, tmp)
            os.replace(tmp, target / name)
    for name in sorted(CHECKPOINT_FILES - set(names)):
        (target / name).unlink(missing_ok=True)
    shutil.rmtree(stage, ignore_errors=True)
