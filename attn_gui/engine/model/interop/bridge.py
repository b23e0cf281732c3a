"""A TransformerLens 4 ``TransformerBridge`` read as a model of the engine (issue 50): what ``memory.register``
needs of it.

A bridge wraps a transformers model (``bridge.original_model``) in place: each module it maps is
replaced in the model's tree by a bridge component holding the module as ``_original_component``.
``hf_tensors`` walks that tree through the components and returns the tensors under transformers'
own names, the model's tensors themselves (no copy).

What a bridge changes is honoured or refused in one line:

- ``enable_compatibility_mode()`` (HookedTransformer's numerics) folds each LayerNorm into the weights
  after it, centres the weights that write to the residual and the unembedding, and folds the value
  biases into the output bias; it writes the processed tensors into the wrapped modules, so they are
  what is read. Two things land outside transformers' modules: the fused Q/K/V of GPT-2 (``c_attn``),
  which TransformerLens splits into its own q, k and v (read, and fused back here: ``fused_qkv``),
  and the final LayerNorm's bias, folded into an unembedding bias b_U that a decoder of the engine
  has no place for: the final norm's bias and the unembedding carry it, exactly, as the norm's
  output is centred (``carry_unembedding_bias``; a copy of W_U).
- Hooks on the bridge's hook points may edit activations the engine does not compute: refused.
- A text is read as ``bridge.to_tokens`` reads it (``bridge_ends``: ``cfg.default_prepend_bos`` is False for
  Qwen2, Qwen3 and GPT-NeoX, whose tokenizer may add a BOS the bridge strips).
- Anything else is caught by ``same_logits``: once registered, the engine must read a text as the same tokens
  as ``bridge.to_tokens`` and give the same next-token logits as ``bridge(text)``, or the model is refused
  (relative 1e-4; 2e-2 for half-precision weights, which TransformerLens runs in half and the engine in float32).
  A transformers model is checked alike against its own forward (``same_as_model``).
"""

from __future__ import annotations

from typing import Any

import torch

from ...base.errors import ConfigError
from ...text.tokenizer_json import wrapped

HALF = (torch.float16, torch.bfloat16)


def class_names(obj: object) -> set[str]:
    """The names of ``obj``'s class and its bases (a class is recognised without importing its library)."""
    return {cls.__name__ for cls in type(obj).__mro__}


def is_bridge(obj: object) -> bool:
    """Whether ``obj`` is a TransformerLens ``TransformerBridge`` (imports nothing)."""
    return "TransformerBridge" in class_names(obj)


def unwrap(bridge, tokenizer, name: str) -> tuple[Any, Any]:
    """The transformers model the bridge wraps and the tokenizer to read it with (the bridge's own where
    ``tokenizer`` is None); ``ConfigError`` for a bridge without a local model, with hooks, or without a tokenizer."""
    try:
        model = bridge.original_model
    except AttributeError:
        raise ConfigError(f"{name}: this TransformerBridge runs no torch model here (a vLLM or remote driver); "
                          "register() reads a bridge around a transformers model") from None
    refuse_hooks(bridge, name)
    if tokenizer is None:
        tokenizer = getattr(bridge, "tokenizer", None)
        if tokenizer is None:
            raise ConfigError(f"{name}: the bridge has no tokenizer; pass one: register(bridge, tokenizer)")
    return model, tokenizer


def refuse_hooks(bridge, name: str, after: bool = False) -> None:
    """``ConfigError`` in one line where the bridge has hooks of the user's (at ``register``, or ``after`` it: a
    hook added to a registered bridge is refused as one there at registration is, at the next compute)."""
    hooked = hooked_points(bridge)
    if hooked:
        more = f" and {len(hooked) - 1} more" if len(hooked) > 1 else ""
        when = "since it was registered" if after else ""
        raise ConfigError(f"{name}: the bridge has hooks on {hooked[0]}{more}{' ' if when else ''}{when}, which may "
                          "change activations the engine does not compute; remove them (bridge.reset_hooks()) "
                          f"{'to run it' if after else 'before registering it'}")


def _users(fn) -> bool:
    """Whether the hook function ``fn`` is the user's: TransformerLens' own hooks wire its components."""
    module = getattr(fn, "__module__", None) or getattr(getattr(fn, "func", None), "__module__", None) or ""
    return not module.startswith("transformer_lens")


def hooked_points(bridge) -> list[str]:
    """The hook points of ``bridge`` with a hook of the user's on them (forward, pre-forward or backward, added
    with ``add_hook`` or as a torch hook), each by its shortest name (TransformerLens names a point by several)."""
    names: dict[int, list[str]] = {}
    for hook_name, point in bridge.hook_dict.items():
        torch_hooks = [*point._forward_hooks.values(), *point._forward_pre_hooks.values(),
                       *point._backward_hooks.values(), *getattr(point, "_backward_pre_hooks", {}).values()]
        lens_hooks = [handle.user_hook for handle in (*point.fwd_hooks, *point.bwd_hooks)]
        if any(_users(fn) for fn in (*torch_hooks, *lens_hooks)):
            names.setdefault(id(point), []).append(hook_name)
    return [min(found, key=lambda n: (n.count("."), len(n))) for found in names.values()]


def label(bridge, model) -> str:
    """How the window and messages describe the bridge."""
    mode = " (compatibility mode)" if getattr(bridge, "compatibility_mode", False) else ""
    return f"TransformerBridge{mode} around {type(model).__name__}"


def _wrapped(module):
    """The module a bridge component wraps (itself where it is not one)."""
    while "_original_component" in module._modules:
        module = module._modules["_original_component"]
    return module


def hf_tensors(model) -> dict[str, torch.Tensor]:
    """Every parameter and persistent buffer of the transformers model ``model`` under transformers' own
    names, stepping through the bridge components to the modules they wrap (their own aliases and the
    modules TransformerLens adds beside them are left out)."""
    found: dict[str, torch.Tensor] = {}

    def walk(module, prefix: str) -> None:
        module = _wrapped(module)
        for key, t in module._parameters.items():
            if t is not None:
                found[prefix + key] = t
        for key, t in module._buffers.items():
            if t is not None and key not in module._non_persistent_buffers_set:
                found[prefix + key] = t
        for key, child in module._modules.items():
            if child is not None:
                walk(child, f"{prefix}{key}.")

    walk(model, "")
    return found


def _key_of(tensors: dict[str, torch.Tensor], t: torch.Tensor | None) -> str | None:
    return next((key for key, held in tensors.items() if held is t), None)


def fused_qkv(bridge, tensors: dict[str, torch.Tensor], kind: str, name: str) -> dict[str, torch.Tensor]:
    """``tensors`` with GPT-2's fused Q/K/V (``c_attn``) rebuilt from the bridge's own split q, k and v where
    weight processing wrote them apart (``enable_compatibility_mode()``); the same split of another family
    (Q/K/V, or gate and up) is refused. Unprocessed, the split parts are the fused tensor's, as booted."""
    joint = [m for m in bridge.modules() if {"JointQKVAttentionBridge", "JointGateUpMLPBridge"} & class_names(m)]
    if not joint or not getattr(bridge, "_weights_processed", False):
        return tensors
    out = dict(tensors)
    for module in joint:
        fused = module._modules.get("qkv")
        key = _key_of(tensors, getattr(_wrapped(fused), "weight", None)) if fused is not None else None
        if kind != "gpt2" or key is None:
            raise ConfigError(f"{name}: in compatibility mode TransformerLens keeps this {kind} model's processed "
                              "weights apart from its fused Q/K/V or gate/up, which the engine does not read; "
                              "register the bridge before enable_compatibility_mode()")
        linears = [_wrapped(module._modules[p]) for p in ("q", "k", "v")]  # nn.Linear: (out, in)
        out[key] = torch.cat([lin.weight.detach() for lin in linears]).T  # Conv1D: (in, out)
        bias_key = _key_of(tensors, getattr(_wrapped(fused), "bias", None))
        if bias_key is not None:
            out[bias_key] = torch.cat([lin.bias.detach() for lin in linears])
    return out


def carry_unembedding_bias(bridge, tensors: dict[str, torch.Tensor], norm: str, name: str) -> dict[str, torch.Tensor]:
    """``tensors`` without the unembedding bias b_U that TransformerLens gives the LM head: dropped where it is
    zero, else carried by the final LayerNorm (its gain folded to 1) and the unembedding, exactly.

    A LayerNorm's output n is centred, 1 . n = 0, so W_U' = W_U + c 1^T reads it as W_U does; with the
    norm's bias beta' = beta + t 1, t = (1 - 1 . beta) / d, and c = b_U - t W_U 1, W_U' beta' = W_U beta + b_U:
    the logits W_U (n + beta) + b_U, and every centred component's direct logit term, unchanged. An RMSNorm's
    output is not centred: refused there, as with a gain other than 1.
    """
    unembed = getattr(bridge, "unembed", None)
    head = _wrapped(unembed) if unembed is not None else None
    bias_key = _key_of(tensors, getattr(head, "bias", None))
    if bias_key is None:
        return tensors
    out = dict(tensors)
    b_u = out.pop(bias_key).detach()
    if not b_u.any():
        return out
    final = getattr(bridge, "ln_final", None)
    gain = getattr(_wrapped(final), "weight", None) if final is not None else None
    beta_key = _key_of(tensors, getattr(_wrapped(final), "bias", None)) if final is not None else None
    weight_key = _key_of(tensors, getattr(head, "weight", None))
    if norm != "layer" or gain is None or beta_key is None or weight_key is None or not bool((gain == 1).all()):
        raise ConfigError(f"{name}: the bridge's unembedding has a bias (b_U) that the engine's decoder cannot "
                          "carry (it needs a final LayerNorm folded into the weights); register it without it")
    w_u, beta = out[weight_key].detach(), out[beta_key].detach()
    t = (1.0 - beta.double().sum()) / beta.numel()
    c = b_u.double() - t * w_u.double().sum(-1)  # (V,)
    out[weight_key] = (w_u.double() + c[:, None]).to(w_u.dtype)
    out[beta_key] = (beta.double() + t).to(beta.dtype)
    return out


def probe_ids(rows: int, first: int | None) -> list[int]:
    """Six token ids spread over the vocabulary (after ``first``, the id a text starts with, if any)."""
    spread = torch.linspace(0, rows - 1, 6).long().tolist()
    return ([] if first is None else [first]) + spread


def probe_text(built) -> str:
    """A text of a few ordinary tokens spread over the vocabulary of ``built`` (``decoder.DecoderModel``), each one
    whose text reads back as itself (no "<s>" that one tokenizer knows as special and another splits): what the
    checks read from text, as a user's sentence is read."""
    tok = built.tokenizer
    held = set(tok.get_vocab(with_added_tokens=True).values())
    words: list[str] = []
    for i in torch.linspace(0, max(held), 64).long().tolist():
        if i in held and i not in built.special_ids:
            word = tok.decode([i], skip_special_tokens=True)
            if word.strip() and tok.encode(word, add_special_tokens=False).ids == [i]:
                words.append(word)
        if len(words) == 6:
            break
    text = tok.decode(tok.encode(" ".join(w.strip() for w in words), add_special_tokens=False).ids).strip()
    return text or "the"


def engine_ids(built, text: str) -> list[int]:
    """The ids the engine reads ``text`` as (``decoder.source.tokenize_with``'s: the tokens it adds around it)."""
    return wrapped(built.tokenizer.encode(text, add_special_tokens=False).ids, built.add_bos, built.add_eos)


def bridge_ends(bridge, built, name: str) -> tuple[int | None, int | None]:
    """The tokens ``bridge.to_tokens`` puts before and after a text (None: none), as the engine must read a text
    to read what the bridge runs: ``cfg.default_prepend_bos`` (False for Qwen2, Qwen3, GPT-NeoX) adds or strips
    the tokenizer's BOS, ``cfg.tokenizer_appends_eos`` strips its EOS. ``ConfigError`` where to_tokens differs
    from the tokenizer by more than those."""
    text = probe_text(built)
    core = built.tokenizer.encode(text, add_special_tokens=False).ids
    theirs = [int(i) for i in bridge.to_tokens(text)[0].tolist()]
    for first, last in ((None, None), (theirs[0], None), (None, theirs[-1]), (theirs[0], theirs[-1])):
        if wrapped(core, first, last) == theirs:
            return first, last
    raise ConfigError(f"{name}: the bridge's to_tokens reads {text[:30]!r} as {len(theirs)} tokens and its tokenizer "
                      f"as {len(core)}, not the same tokens with one added before or after; nothing was registered")


def engine_output(built, ids: list[int]) -> torch.Tensor:
    """The engine's next-token logits (V,) after ``ids``, in float32; its last hidden state (d,) for a decoder
    without a language-model head."""
    from ...readers import stored
    from ..decoder.forward import forward

    device = built.weights["model.embed_tokens.weight"].device
    weights: Any = stored.weights_on(built.weights, str(device), torch.float32)  # converted as each layer reads
    with torch.no_grad():
        run = forward(weights, torch.tensor(ids, device=device), built.shape)
    return run.logits if built.predicts else run.residual[-1][-1]


def _compare(theirs: torch.Tensor, ours: torch.Tensor, built, what: str, whose: str) -> None:
    """Refuse (one line) where ``ours`` differs from ``theirs`` by more than 1e-4 of the largest (2e-2 for half-
    precision weights or a bridge run in half (``to_lens(dtype=...)``), which the engine runs in float32)."""
    half = theirs.dtype in HALF or built.weights["model.embed_tokens.weight"].dtype in HALF
    theirs = theirs.float().to(ours.device)
    rows = min(theirs.shape[-1], ours.shape[-1])  # TransformerLens may pad d_vocab
    diff = float((theirs[:rows] - ours[:rows]).abs().max())
    tolerance = 2e-2 if half else 1e-4
    if not diff <= tolerance * max(1.0, float(theirs.abs().max())):
        raise ConfigError(f"{what}: the engine's {'logits' if built.predicts else 'hidden states'} differ from "
                          f"{whose} by {diff:.3g}: it computes a step or a setting the engine does not (or its "
                          "config no longer says what its weights compute); nothing was registered")


def same_logits(bridge, built, what: str, from_text: bool = True) -> None:
    """Refuse (one line) where the engine, reading a text as it reads a sentence, runs other tokens than
    ``bridge.to_tokens`` or gives other next-token logits than ``bridge(text)``: a step, a setting or a token the
    one reads and the other does not. ``from_text`` False (a tokenizer other than the bridge's): the logits of
    the same few ids."""
    if not from_text:
        ids = probe_ids(built.weights["model.embed_tokens.weight"].shape[0], built.add_bos)
        _compare(_run_eval(bridge, torch.tensor([ids], device=bridge.cfg.device)), engine_output(built, ids), built,
                 what, "the TransformerLens bridge's")
        return
    text = probe_text(built)
    ours_ids, theirs_ids = engine_ids(built, text), [int(i) for i in bridge.to_tokens(text)[0].tolist()]
    if ours_ids != theirs_ids:
        pairs = zip([*ours_ids, None], [*theirs_ids, None], strict=False)  # None: past the shorter one's end
        at = next(i for i, (a, b) in enumerate(pairs) if a != b)
        raise ConfigError(f"{what}: the engine reads {text[:30]!r} as {len(ours_ids)} tokens, the bridge's "
                          f"to_tokens as {len(theirs_ids)}, first apart at token {at + 1}; nothing was registered")
    _compare(_run_eval(bridge, text), engine_output(built, ours_ids), built, what, "the TransformerLens bridge's")


def _run_eval(bridge, given) -> torch.Tensor:
    """The bridge's next-token logits (V,) after ``given`` (a text, or ids (1, n)), run in eval mode."""
    training = bridge.training
    try:
        bridge.eval()
        with torch.no_grad():
            return bridge(given, return_type="logits")[0, -1]
    finally:
        bridge.train(training)


def same_as_model(model, built, what: str) -> None:
    """Refuse (one line) where the engine's next-token logits (last hidden state, without an LM head) of the
    decoder ``built`` on a few tokens differ from the transformers ``model``'s own forward: a config edited after
    the model was built (rope_theta), or a step one computes and the other does not."""
    ids = probe_ids(built.weights["model.embed_tokens.weight"].shape[0], built.add_bos)
    training = model.training
    try:
        model.eval()
        with torch.no_grad():
            out = model(torch.tensor([ids], device=built.weights["model.embed_tokens.weight"].device), return_dict=True)
    except (RuntimeError, AttributeError, TypeError, ValueError, IndexError) as exc:  # the object's own forward
        raise ConfigError(f"{what}: the model's own forward fails on a few tokens ({type(exc).__name__}: {exc!s:.80}),"
                          " so the engine's reading of it cannot be checked; nothing was registered") from None
    finally:
        model.train(training)
    theirs = out.logits[0, -1] if built.predicts else out.last_hidden_state[0, -1]
    _compare(theirs, engine_output(built, ids), built, what, "the model's own forward")
