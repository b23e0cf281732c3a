"""A model folder whose model_type is outside the family table, read through transformers itself (issue 31).

attn-gui does not run such a model's attention: transformers does, with eager attention and
``output_attentions``, and forward hooks read what its modules see. Every layer's α is
transformers' own. The other steps are the tensors the hooks hold where the module names are
standard: X (the attention module's input, a forward pre-hook), Q, K and V (the outputs of
``q_proj``/``k_proj``/``v_proj``, ``query``/``key``/``value``, or of a fused ``query_key_value``
split by the module's own ``_split_heads``), Z (the input of ``o_proj``/``dense``/``out_proj``/
``c_proj``) and the attention module's output. In a model that rotates q and k (RoPE) the
projections' outputs are q and k before the rotation. A model written on transformers' attention
interface (its file defines ``eager_attention_forward``) runs its own eager function through a
wrapper registered as ``attn_gui_capture`` (with the eager mask), which also reads the q and k that
function receives: after the rotation and any norm. What no hook reaches (the scores, inside the
eager function; q and k after RoPE in a model off the interface, such as Falcon before transformers 5.25; q and k
before RoPE where a fused projection is split inline, as Falcon's is from 5.25 on) the result names in
``not_captured`` and the window says so in its maps' titles. Nothing here computes a step itself.

transformers is an optional extra (``pip install attn-gui[transformers]``); without it,
the one line that refuses a model_type outside the table says how to enable this path. A
folder that needs remote code (``auto_map``: ``trust_remote_code``) is refused: attn-gui
never executes code from a model folder. Nothing is downloaded.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch

from ...kernel.types import Projections
from ...base.disk import json_object
from ...base.errors import ConfigError
from ...text.tokens import Tokens
from ...readers import checks
from ...readers.catalog import model_spec
from ...readers.transformers_spec import HINT, installed
from ..source import ModelSource, unknown_of
from ..loaded import LOADED
from ...specs.spec import ModelSpec
from ...text.tokenizer_json import wrapped

# the child module names of an attention module, per role, as transformers' model files name them
Q_NAMES, K_NAMES, V_NAMES = ("q_proj", "query", "q"), ("k_proj", "key", "k"), ("v_proj", "value", "v")
FUSED_NAMES = ("query_key_value", "c_attn", "Wqkv", "qkv_proj", "qkv")
OUT_NAMES = ("o_proj", "dense", "out_proj", "c_proj", "o", "wo", "out")
# the steps a layer of this path can show, in data-flow order
STEPS = ("x", "q_unrotated", "k_unrotated", "q", "k", "v", "scores", "scaled", "weights", "head_outputs", "concat",
         "output")


CAPTURE = "attn_gui_capture"  # the attention implementation that runs the model's eager one and reads q, k
_INTO: dict[int, dict] = {}  # during a run: id(attention module) -> its layer's steps
_RUNNING = threading.Lock()  # one run at a time fills _INTO


def _eager(module: torch.nn.Module):
    """The eager attention function of ``module``'s model file, or None (a model off the interface)."""
    return getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)


def _capture(module, query, key, value, attention_mask, **kwargs):
    """The model's own eager attention, its q and k (after RoPE; K before repeat_kv) kept for the layer."""
    into = _INTO.get(id(module))
    if into is not None:
        into["q"], into["k"] = query[0], key[0]  # (h, T, d_k), (g, T, d_k)
        # V as the module hands it over (before repeat_kv): a fused projection the hooks cannot split (Falcon
        # since transformers 5.25 splits query_key_value inline, without _split_heads) still shows its V
        into.setdefault("v", value[0])
    return _eager(module)(module, query, key, value, attention_mask, **kwargs)


@functools.cache
def _register_capture() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(CAPTURE, _capture)
    AttentionMaskInterface.register(CAPTURE, eager_mask)  # the mask eager attention is given


@dataclass(frozen=True)
class Layer:
    """One attention module and the children the hooks read (None: not found under a standard name)."""

    attention: torch.nn.Module
    q: torch.nn.Module | None
    k: torch.nn.Module | None
    v: torch.nn.Module | None
    fused: torch.nn.Module | None  # a fused q, k, v projection, split by ``split``
    out: torch.nn.Module | None
    split: Callable | None = None  # the attention module's own _split_heads (Falcon, BLOOM)


@dataclass(frozen=True)
class Held:
    """A model loaded through transformers: the model, its tokenizer and the modules the hooks read."""

    model: torch.nn.Module
    kind: str
    tokenizer: Any  # a tokenizers.Tokenizer
    vocab: tuple[str, ...]
    add_bos: int | None
    add_eos: int | None  # tokenizer.json's end token after the text (add_eos_token), or None
    layers: tuple[Layer, ...]
    rotary: bool  # q and k are rotated inside the attention module (RoPE): the projections give them unrotated
    predicts: bool  # a language-model head: the next tokens


def _child(module: torch.nn.Module, names: tuple[str, ...]) -> torch.nn.Module | None:
    return next((getattr(module, n) for n in names if isinstance(getattr(module, n, None), torch.nn.Module)), None)


def attention_modules(model: torch.nn.Module, layers: int, where: str) -> tuple[Layer, ...]:
    """Each layer's attention module: the innermost modules whose class name ends in "Attention", one a layer;
    ``ConfigError`` when they are not ``layers`` of them."""
    named = [m for m in model.modules() if type(m).__name__.endswith("Attention")]
    inner = [m for m in named if not any(c is not m and type(c).__name__.endswith("Attention") for c in m.modules())]
    if len(inner) != layers:
        raise ConfigError(f"{where}: attn-gui finds {len(inner)} attention modules in {layers} layers, so it cannot "
                          "tell which is each layer's through transformers")
    splits = [getattr(m, "_split_heads", None) for m in inner]
    return tuple(Layer(m, _child(m, Q_NAMES), _child(m, K_NAMES), _child(m, V_NAMES),
                       _child(m, FUSED_NAMES) if callable(split) else None, _child(m, OUT_NAMES),
                       split if callable(split) else None)
                 for m, split in zip(inner, splits, strict=True))


def _read(spec: ModelSpec) -> Held:
    import transformers

    from ...text.byte_bpe import readable
    from ...readers import stored
    from ...text.tokenizer_json import added_tokens

    folder = Path(spec.name).expanduser()
    cfg = json_object(folder / "config.json", f"{folder.name}/config.json")
    try:  # a model too large for the memory free is refused before transformers loads it
        stored.check_memory(folder.name, sorted(folder.glob("*.safetensors")))
    except (OSError, ValueError, KeyError, TypeError, OverflowError) as exc:
        raise ConfigError(f"{folder.name}: the weights cannot be read ({exc!s:.80})") from None
    transformers.utils.logging.disable_progress_bar()  # its loading bar would break the CLI's one-line output
    heads = any("ForCausalLM" in a for a in cfg.get("architectures") or [])
    auto = transformers.AutoModelForCausalLM if heads else transformers.AutoModel
    verbosity = transformers.utils.logging.get_verbosity()
    transformers.utils.logging.set_verbosity_error()  # its load report (dozens of lines) is said in one here
    try:
        model, info = cast(Any, auto.from_pretrained(str(folder), attn_implementation="eager", local_files_only=True,
                                                     trust_remote_code=False, dtype=torch.float32,
                                                     output_loading_info=True))  # (model, its loading report)
    except Exception as exc:  # noqa: BLE001  one line, whatever transformers raises
        raise ConfigError(f"{folder.name}: transformers cannot load it: {str(exc).splitlines()[0]:.100}") from None
    finally:
        transformers.utils.logging.set_verbosity(verbosity)
    missing = sorted(info.get("missing_keys") or ())
    if missing:  # transformers would fill them with random values
        raise ConfigError(f"{folder.name}: its weights lack {len(missing)} of the model's tensors ({missing[0]:.60}"
                          f"{', ...' if len(missing) > 1 else ''}), which transformers would fill with random values")
    model.eval()
    tokenizer = checks.tokenizer(folder / "tokenizer.json")
    special = frozenset(i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special)
    ids = tokenizer.get_vocab(with_added_tokens=True)
    rows = model.get_input_embeddings().weight.shape[0]
    checks.token_ids(folder.name, ids, rows)
    texts = [f"<unused {i}>" for i in range(max(max(ids.values()) + 1, rows))]
    for tok, i in ids.items():
        texts[i] = readable(tok, i in special)
    rotary = any("Rotary" in type(m).__name__ for m in model.modules()) and not getattr(model.config, "alibi", False)
    layers = attention_modules(model, spec.layers, folder.name)
    if all(_eager(layer.attention) is not None for layer in layers):  # on transformers' attention interface
        _register_capture()
        model.config._attn_implementation = CAPTURE
    return Held(model, str(cfg.get("model_type")), tokenizer, tuple(texts), *added_tokens(tokenizer, folder),
                layers, rotary,
                predicts=model.get_output_embeddings() is not None)


def held(name: str) -> Held:
    """The model ``name`` loaded through transformers (kept in the one cache of loaded models)."""
    spec = model_spec(name)
    return LOADED.get(name, lambda: _read(spec))


@dataclass(frozen=True)
class Captured:
    """One run through transformers: each layer's captured steps (field name -> tensor, no batch axis),
    every layer's α (L, h, T, T), the last hidden state (T, d) and the last position's logits (or None)."""

    steps: tuple[dict[str, torch.Tensor], ...]
    weights: torch.Tensor
    last: torch.Tensor
    logits: torch.Tensor | None


def _per_head(t: torch.Tensor, d_k: int) -> torch.Tensor | None:
    """(T, n d_k) as (n, T, d_k); None where the width is no multiple of d_k."""
    T, width = t.shape
    return t.view(T, width // d_k, d_k).transpose(0, 1) if width % d_k == 0 else None


def _hooks(layer: Layer, into: dict, d_k: int, rotary: bool) -> list:
    """Register the hooks that fill ``into`` with ``layer``'s steps; returns their handles."""
    q_name, k_name = ("q_unrotated", "k_unrotated") if rotary else ("q", "k")

    def x_in(module, args, kwargs):
        x = kwargs.get("hidden_states", args[0] if args else None)
        if isinstance(x, torch.Tensor):
            into["x"] = x[0]

    def out(module, args, output):
        into["output"] = (output[0] if isinstance(output, tuple) else output)[0]

    def projection(name):
        def hook(module, args, output):
            heads = _per_head(output[0], d_k)
            if heads is not None:
                into[name] = heads
        return hook

    def fused(split: Callable):
        def hook(module, args, output):
            parts = split(output)  # the module's own split: (1, T, n, d_k) each
            for name, part in zip((q_name, k_name, "v"), parts, strict=True):
                if part.dim() == 4 and part.shape[-1] == d_k:
                    into[name] = part[0].transpose(0, 1)
        return hook

    def z_in(module, args):
        into["concat"] = args[0][0]
        heads = _per_head(args[0][0], d_k)
        if heads is not None:
            into["head_outputs"] = heads

    handles = [layer.attention.register_forward_pre_hook(x_in, with_kwargs=True),
               layer.attention.register_forward_hook(out)]
    for module, name in ((layer.q, q_name), (layer.k, k_name), (layer.v, "v")):
        if module is not None:
            handles.append(module.register_forward_hook(projection(name)))
    if layer.fused is not None and layer.split is not None and layer.q is None:
        handles.append(layer.fused.register_forward_hook(fused(layer.split)))
    if layer.out is not None:
        handles.append(layer.out.register_forward_pre_hook(z_in))
    return handles


@functools.lru_cache(maxsize=2)
def run(name: str, ids: tuple[int, ...], device: str, dtype: torch.dtype) -> Captured:
    """Run the model through transformers on ``ids``, capturing every layer's steps (the last two runs kept)."""
    model = held(name)
    net = model.model.to(device=device, dtype=dtype)
    steps: list[dict] = [{} for _ in model.layers]
    d_k = model_spec(name).d_k
    handles = [h for layer, into in zip(model.layers, steps, strict=True) for h in _hooks(layer, into, d_k,
                                                                                           model.rotary)]
    try:
        with _RUNNING, torch.no_grad():
            _INTO.update({id(layer.attention): into for layer, into in zip(model.layers, steps, strict=True)})
            out = net(input_ids=torch.tensor([ids], device=device), output_attentions=True,
                      output_hidden_states=True)
    finally:
        _INTO.clear()
        for h in handles:
            h.remove()
    if not out.attentions or any(a is None for a in out.attentions):
        raise ConfigError(f"{model_spec(name).label}: transformers gives no attention weights for it "
                          "(output_attentions with eager attention)")
    logits = out.logits[0, -1] if model.predicts and getattr(out, "logits", None) is not None else None
    return Captured(tuple(steps), torch.stack([a[0] for a in out.attentions]), out.hidden_states[-1][0], logits)


LOADED.on_drop(run.cache_clear)


def uncaptured(captured: dict, rotary: bool) -> tuple[str, ...]:
    """The steps a layer did not capture, in data-flow order (the unrotated pair only in a RoPE model)."""
    return tuple(s for s in STEPS if s not in captured and (rotary or s not in ("q_unrotated", "k_unrotated")))


def captured(name: str, token_ids: torch.Tensor, layer: int, device, dtype: torch.dtype
             ) -> tuple[dict[str, torch.Tensor], torch.Tensor, tuple[str, ...]]:
    """Layer ``layer``'s captured steps of model ``name`` with ``weights`` (its α), every layer's α, and the
    steps not captured (``compute`` builds the result of them)."""
    out = run(name, tuple(token_ids.tolist()), str(device), dtype)
    steps = {**out.steps[layer], "weights": out.weights[layer]}
    return steps, out.weights, uncaptured(steps, held(name).rotary)


class Source(ModelSource):
    """A model of a model_type outside the table, run by transformers; its steps read with hooks
    (``captured`` gives one layer's)."""

    install_hint = HINT

    def available(self) -> bool:
        return installed()

    def load(self, progress=None) -> None:
        held(self.spec.name)

    def loaded(self) -> bool:
        return self.spec.name in LOADED

    def tokenize(self, sentence: str) -> Tokens:
        model = held(self.spec.name)
        ids = wrapped(model.tokenizer.encode(sentence, add_special_tokens=False).ids, model.add_bos, model.add_eos)
        return Tokens(tuple(model.vocab[i] for i in ids), tuple(ids), model.vocab)

    def unknown_token(self) -> str | None:
        return unknown_of(held(self.spec.name).tokenizer)

    def layer_inputs(self, token_ids, device, dtype, layers=None):  # the plan refuses what-if layers (Plan.check)
        out = run(self.spec.name, tuple(token_ids.tolist()), str(device), dtype)
        return [*(s["x"] for s in out.steps), out.last], out.weights

    def layer_weights(self, layer, device, dtype) -> Projections:
        return Projections()  # the weights stay inside transformers' modules: only what the hooks see is shown

    def next_tokens(self, token_ids, device, dtype, k: int = 5, layers=None):
        out = run(self.spec.name, tuple(token_ids.tolist()), str(device), dtype)
        if out.logits is None:
            return None
        probs = torch.softmax(out.logits.double(), dim=-1)
        top = probs.topk(min(k, probs.numel()))
        vocab = held(self.spec.name).vocab
        return tuple((vocab[i], float(p)) for p, i in zip(top.values.tolist(), top.indices.tolist(), strict=True))
