"""Any decoder the engine reads, handed to TransformerLens 4 as a ``TransformerBridge`` (``attn_gui.to_lens``).

``to_lens(name)`` builds the transformers model of the decoder ``name`` (a folder, a GGUF file, the
bundled SmolLM2, a checkpoint ``attn-gui train`` wrote, a registered model) from the engine's own
reading of it, and boots TransformerLens' bridge around it, so that a researcher continues in their
own notebooks on the very numbers the window showed:

- a folder (and a checkpoint): its config.json and its tensors under their own names;
- a registered model: its config and the tensors ``register`` read (a bridge's processed ones too);
- a GGUF file: a config written from what the engine read of its header (Llama, Mistral, Qwen2 and
  Qwen3), and its tensors as the engine dequantizes them (W_q and W_k un-permuted).

The tensors are copied into the new model in ``dtype`` (float32 by default: the engine's CPU forward
runs in float32), so the bridge never shares memory with the engine or the user's model. The
tokenizer is the engine's own (a copy), with the model's BOS added as the engine adds it. The
bridge's next-token logits on a few tokens are checked against the engine's before it is returned
(``bridge.same_logits``). TransformerLens is an optional extra: without it, one line names it.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import torch

from ...base.devices import resolve_device
from ...base.errors import ConfigError, DeviceError, ModelUnavailable
from ...readers.catalog import model_spec
from .bridge import same_logits
from ...specs.families import FAMILIES

HINT = 'pip install "attn-gui[lens]"'
GGUF_FAMILIES = ("llama", "qwen2", "qwen3")  # a GGUF's config is written here for these
EMBEDDINGS = ("model.embed_tokens.weight", "transformer.wte.weight", "gpt_neox.embed_in.weight")  # transformers' names
HEADS = ("lm_head.weight", "embed_out.weight")


def installed() -> bool:
    """Whether transformer-lens can be imported here (imports nothing)."""
    try:
        return importlib.util.find_spec("transformer_lens") is not None
    except (ImportError, ValueError):  # sys.modules["transformer_lens"] = None: as if not installed
        return False


def to_lens(name: str, *, device: str = "cpu", dtype: torch.dtype = torch.float32):
    """The decoder ``name`` (a bundled name, a folder, a .gguf file or a registered name) as a TransformerLens
    ``TransformerBridge``, whose logits equal the engine's.

    Parameters
    ----------
    name : str
        What ``AttentionConfig(model=...)`` takes.
    device : str
        Where the bridge's model lives ("cpu", "cuda").
    dtype : torch.dtype
        Its weights' dtype (float32: the engine's numbers; a half dtype halves the memory).

    Returns
    -------
    transformer_lens.model_bridge.TransformerBridge
        Plain (transformers' numerics); call ``enable_compatibility_mode()`` on it for
        HookedTransformer's. Its ``original_model`` is a new transformers model; its tokenizer
        gives the engine's token ids (``bridge.to_tokens``).

    Raises
    ------
    ModelUnavailable
        transformer-lens (or transformers) is not installed: one line naming the extra.
    ConfigError
        An encoder, a GGUF of a family whose config is not written here, or a bridge whose logits
        differ from the engine's, in one line.
    """
    if not installed() or importlib.util.find_spec("transformers") is None:
        raise ModelUnavailable(f"to_lens needs transformer-lens (TransformerLens 4), which is not installed: {HINT}")
    device = _checked(device, dtype)
    from ..decoder.source import load_model

    spec = model_spec(name)
    if spec.module != "decoder" or spec.through:
        raise ConfigError(f"{spec.label}: to_lens hands over the decoders the engine runs itself")
    model = load_model(name)
    cfg, tensors = _parts(spec, model)
    hf = _transformers_model(cfg, tensors, spec.label, device, dtype)
    from transformer_lens.model_bridge import TransformerBridge

    try:
        bridge = TransformerBridge.boot_transformers(spec.name, hf_model=hf, tokenizer=_tokenizer(spec, model),
                                                     device=device, dtype=dtype)
    except (ValueError, NotImplementedError, KeyError) as exc:  # an architecture TransformerLens has no adapter for
        raise ConfigError(f"{spec.label}: TransformerLens cannot bridge it ({exc!s:.100})") from None
    bridge.cfg.default_prepend_bos = model.add_bos is not None  # to_tokens gives the engine's ids
    same_logits(bridge, model, spec.label)
    return bridge


DTYPES = {torch.float32: "torch.float32", torch.float64: "torch.float64", torch.float16: "torch.float16",
          torch.bfloat16: "torch.bfloat16"}
DEVICE = re.compile(r"cpu|mps|cuda(?::[0-9]+)?")  # [0-9], not \d: "cuda:٣" is no device


def _checked(device, dtype) -> str:
    """``device`` as a string where the bridge can live there and ``dtype`` is one it computes in; ``ConfigError``
    in one line otherwise (an int8, bool or complex dtype, the string "float32", the meta device, a device this
    machine lacks), before anything is built."""
    if not isinstance(dtype, torch.dtype) or dtype not in DTYPES:
        raise ConfigError(f"to_lens: dtype must be {', '.join(DTYPES.values())}, not {dtype!r:.60}")
    if isinstance(device, torch.device):
        device = str(device)
    if not isinstance(device, str) or not DEVICE.fullmatch(device):
        raise ConfigError(f"to_lens: device must be cpu, cuda, cuda:N or mps, not {device!r:.60}")
    try:
        resolve_device(device)
    except DeviceError as exc:
        raise ConfigError(f"to_lens: {exc}") from None
    return device


def _parts(spec, model) -> tuple[dict, Any]:
    """The transformers config dict and the tensors (transformers' names) of the decoder ``model``."""
    if spec.reader == "hf":
        from ...readers.hf.weights import read_weights

        folder = Path(spec.name).expanduser()
        return json.loads((folder / "config.json").read_text()), read_weights(folder)
    if spec.reader == "memory":
        from .memory import registered

        cfg, weights, _ = registered(spec.name)
        embed = next((weights[k] for k in EMBEDDINGS if k in weights), None)
        head = next((weights[k] for k in HEADS if k in weights), None)
        tied = head is None or (embed is not None and head.data_ptr() == embed.data_ptr())
        return {**cfg, "tie_word_embeddings": tied}, weights  # a processed bridge's head is its own
    return _gguf_config(spec, model), model.weights


def _gguf_family(spec) -> str:
    """The model_type of a GGUF decoder's family (the bundled SmolLM2: Llama)."""
    if spec.reader == "smollm2":
        return "llama"
    from ...readers.gguf.format import read_header

    family = read_header(Path(spec.name).expanduser()).family
    return next(kind for kind, f in FAMILIES.items() if f is family)


def _gguf_config(spec, model) -> dict:
    """A transformers config dict of the GGUF decoder ``model``, from what the engine read of its header."""
    kind = _gguf_family(spec)
    shape, w = model.shape, model.weights
    windows = any(o.window is not None for o in shape.attention)  # each layer's own, as the model runs it
    if kind not in GGUF_FAMILIES or windows or spec.rope_dims is not None or shape.act != "silu":
        raise ConfigError(f"{spec.label}: to_lens writes the config of a GGUF of {', '.join(GGUF_FAMILIES)} "
                          "without sliding windows only")
    cfg: dict[str, Any] = dict(
        model_type=kind, vocab_size=w["model.embed_tokens.weight"].shape[0], hidden_size=spec.d_model,
        intermediate_size=w["model.layers.0.mlp.up_proj.weight"].shape[0], num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads, num_key_value_heads=spec.kv_head_count, head_dim=spec.d_k,
        rms_norm_eps=shape.eps, max_position_embeddings=spec.max_tokens, hidden_act="silu",
        tie_word_embeddings="lm_head.weight" not in w, bos_token_id=model.add_bos,
        eos_token_id=model.eos_id if model.eos_id >= 0 else None)
    rope: dict[str, Any] = {"rope_type": "default", "rope_theta": spec.rope_base}
    if spec.rope_scaling:
        scaling = dict(spec.rope_scaling)
        scaling.pop("max_position_embeddings", None)
        rope.update(scaling)
    cfg["rope_parameters"] = rope
    if kind == "llama":
        cfg["attention_bias"] = "model.layers.0.self_attn.q_proj.bias" in w
    return cfg


def _transformers_model(cfg: dict, tensors, what: str, device: str, dtype: torch.dtype):
    """The transformers causal LM of config ``cfg`` holding a copy of ``tensors`` in ``dtype`` on ``device``."""
    import transformers

    fields = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures", "transformers_version")}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **fields)
    cls: Any = transformers.AutoModelForCausalLM._model_mapping[type(config)]
    state = {key: tensors[key].detach().to(device=device, dtype=dtype, copy=True) for key in tensors}
    hf, info = cls.from_pretrained(None, config=config, state_dict=state, attn_implementation="eager", dtype=dtype,
                                   output_loading_info=True)
    missing = [k for k in info["missing_keys"] if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing:
        raise ConfigError(f"{what}: the engine's weights lack {missing[0]} for transformers' {type(hf).__name__}")
    return hf.to(device).eval()


def _tokenizer(spec, model):
    """A transformers fast tokenizer of the engine's tokenizer (a copy), adding the BOS the engine adds."""
    import transformers
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(_tokenizer_json(spec))
    special = {key: tokenizer.id_to_token(i) for key, i in (("bos_token", model.add_bos), ("eos_token", model.eos_id))
               if i is not None and i >= 0}
    unk = getattr(tokenizer.model, "unk_token", None)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, name_or_path=spec.name,
                                                add_bos_token=model.add_bos is not None,
                                                **special, **({"unk_token": unk} if unk else {}))


def _tokenizer_json(spec) -> str:
    """The engine's tokenizer of ``spec`` as tokenizer.json text: the folder's, the registered one, or a GGUF's
    built into the cache."""
    if spec.reader == "hf":
        return (Path(spec.name).expanduser() / "tokenizer.json").read_text(encoding="utf-8")
    if spec.reader == "memory":
        from .memory import registered

        tokenizer: Any = registered(spec.name)[2]  # a tokenizers.Tokenizer
        return tokenizer.to_str()
    from ...readers.cache import cache_root
    from ...readers.gguf.load import cache_name

    folder = spec.name if spec.reader == "smollm2" else cache_name(Path(spec.name).expanduser())
    return (cache_root() / folder / "tokenizer.json").read_text(encoding="utf-8")
