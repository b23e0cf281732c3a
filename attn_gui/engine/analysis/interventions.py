"""Which head matters: knock heads out (ablation) or copy them from another input (activation patching).

Both act on the per-head outputs Z (h, n, d_v) of a decoder layer, just before the concat and
W_O, through the ``z_hook`` of ``attention.attend`` threaded through the one decoder forward
(``sources/llama.py``); so they work for every model source that runs that forward.

    ablated Z_i = 0                       (mode "zero")
    ablated Z_i = mean over positions of Z_i, every row   (mode "mean")
    patched Z_i = Z_i of the clean input  (run on the corrupted input)

``head_effects`` and ``patch_effects`` give a (L, h) grid, exactly (every cell is a forward
pass, not a gradient): the residual stream below layer l is the clean run's, computed once,
and the h variants of layer l run as one batch (``torch.vmap``) through layers l ... L - 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from ..model.hooks import Head, ablation_hooks, by_layer, knock_out, z_hooks
from ..model.wiring import hook_name
from ..config.config import AttentionConfig
from ..base.errors import ConfigError
from ..model.plan import Plan, Planned, Request, as_plan
from ..specs.families import MAX_TOKENS
from ..model.decoder.forward import decoder_layer
from ..model.decoder.parts import logits, norm



@dataclass(frozen=True)
class Run:
    """A decoder run with an intervention: its next-token logits (V,) and its token ids."""

    logits: torch.Tensor
    token_ids: tuple[int, ...]


def check_heads(request: Request | Planned, heads) -> tuple[Head, ...]:
    """The (layer, head) pairs as ints, refused with one line if out of range (counted from 1 in the message)."""
    dims = _runner(request).spec
    out = []
    for layer, head in heads:
        if not (0 <= layer < dims.layers and 0 <= head < dims.heads):
            raise ConfigError(f"head {layer + 1}.{head + 1} does not exist: layers are 1 to {dims.layers}, "
                              f"heads 1 to {dims.heads}")
        out.append((int(layer), int(head)))
    return tuple(out)


def _runner(request: Request | Planned) -> Planned:
    """The decoder a request runs on (``Plan.runner``), refusing in one line what cannot be intervened on."""
    return request if isinstance(request, Planned) else as_plan(request).runner("intervene")


def _ids(src, config: AttentionConfig) -> tuple[int, ...]:
    ids = tuple(src.tokenize(config.sentence).token_ids)
    if len(ids) > MAX_TOKENS:  # the runs here keep every layer's T x T alpha (and attribution every head's write)
        raise ConfigError(f"interventions and attribution read at most {MAX_TOKENS} tokens (they keep every "
                          f"layer's T × T α); this text has {len(ids):,}")
    return ids


def ablate(request: Request, heads, mode: str = "zero") -> Run:
    """Run ``config``'s sentence with the (layer, head) pairs (0-based) knocked out before W_O.

    Parameters
    ----------
    request : AttentionConfig or Plan
        A decoder model (``model="smollm2-135m"``) and the sentence, or its plan.
    heads : iterable of (layer, head)
    mode : "zero" or "mean"
        Zero the head's Z, or replace every row of it by its mean over the input's positions.
    """
    p = as_plan(request)
    src = _runner(p)
    heads = check_heads(src, heads)
    device, dtype = p.exact_device()
    ids = _ids(src, p.config)
    run = src.forward(torch.tensor(ids), device, dtype, hooks=ablation_hooks(heads, mode))
    return Run(run.logits, ids)


UNKNOWN = ("<unk>", "[UNK]", "<|unk|>", "<unknown>")  # the unknown token's names in the families read


def target_id(model: Request | Planned, target: str | int | None, logits: torch.Tensor) -> int:
    """The vocabulary id of ``target`` (a token's text or id) in ``model``'s vocabulary (a decoder as a plan runs
    it, or the request or plan of one); None: the top next token of ``logits``."""
    if target is None:
        return int(logits.argmax())
    src = _runner(model)
    name = src.plan.config.model
    vocab = src.tokenize("").vocab
    if isinstance(target, int):
        if not 0 <= target < len(vocab):
            raise ConfigError(f"target id {target} is not in the vocabulary (0 to {len(vocab) - 1})")
        return target
    if target in vocab:
        return vocab.index(target)  # as the maps show it ("␣Paris")
    ids = src.tokenize(target).token_ids  # as typed (" Paris")
    if len(ids) != 1:
        raise ConfigError(f"target {target!r} is not one token of {name}'s vocabulary "
                          f"({len(ids)} tokens); type one token, e.g. ' Paris' with its leading space")
    if vocab[ids[0]] in UNKNOWN:  # read as the unknown token: measuring it would measure no word of the target
        raise ConfigError(f"target {target!r:.40} is not in {name}'s vocabulary (it reads as the unknown "
                          f"token {vocab[ids[0]]})")
    return ids[0]


@dataclass(frozen=True)
class Grid:
    """A (L, h) grid being filled: ``values`` (NaN where not computed yet), ``done`` layers of ``total``.

    ``target`` is the vocabulary id whose log p ``head_effects`` measures (None for patching).
    """

    values: torch.Tensor
    done: int
    total: int
    target: int | None = None


def _layer_batches(p: Plan, ids: tuple[int, ...], hook_for: Callable[[int, int], Callable],
                   cancelled: Callable[[], bool] | None) -> Iterator[tuple[int, torch.Tensor]]:
    """For each layer l, the (h, V) last-row logits with each head i of l intervened on by ``hook_for(l, i)``.

    The residual stream entering l is the plain run's; the h variants run as one vmapped batch above it.
    """
    src = _runner(p)
    device, dtype = p.exact_device()
    w, shape = src.decoder(device, dtype)
    with torch.no_grad():
        clean = src.forward(torch.tensor(ids), device, dtype)
        for layer in range(shape.layers):
            if cancelled is not None and cancelled():
                return
            below = clean.residual[layer]  # (n, d), the same for every head of this layer
            picks = torch.eye(shape.heads, dtype=dtype, device=device)  # (h, h): row i picks head i

            def first(pick, layer=layer, below=below):
                return decoder_layer(below, w, layer, shape, hooks=z_hooks({layer: hook_for(layer, pick)}))[0]
            h = torch.vmap(first)(picks)  # (h, n, d)
            for above in range(layer + 1, shape.layers):
                h = torch.vmap(lambda r, above=above: decoder_layer(r, w, above, shape)[0])(h)
            yield layer, logits(norm(h[:, -1], w, "model.norm", shape), w, shape.final_softcap)  # (h, V)


def _masked(pick: torch.Tensor) -> torch.Tensor:
    return pick[:, None, None]  # (h, 1, 1): 1 on the intervened head


def head_effects(request: Request, target: str | int | None = None, mode: str = "zero",
                 cancelled: Callable[[], bool] | None = None) -> Iterator[Grid]:
    """The change in log p(target) when each head alone is ablated, as a (L, h) grid filled layer by layer.

    Yields a ``Grid`` after each layer (for a progress bar); the last has every value. Stops
    early, without a last grid, when ``cancelled()`` returns True. ``target`` defaults to the
    top next token of the plain run.
    """
    p = as_plan(request)
    src = _runner(p)
    knock_out([], mode)  # refuses a bad mode before any work
    device, dtype = p.exact_device()
    ids = _ids(src, p.config)
    base = torch.log_softmax(src.forward(torch.tensor(ids), device, dtype).logits.double(), -1)
    t = target_id(src, target, base)
    dims = src.spec
    values = torch.full((dims.layers, dims.heads), float("nan"), dtype=torch.float64)

    def hook_for(layer, pick):
        m = _masked(pick)
        if mode == "zero":
            return lambda z: z * (1 - m)
        return lambda z: z * (1 - m) + z.mean(-2, keepdim=True) * m
    for layer, layer_logits in _layer_batches(p, ids, hook_for, cancelled):
        values[layer] = torch.log_softmax(layer_logits.double(), -1)[:, t].cpu() - base[t].cpu()
        yield Grid(values.clone(), layer + 1, dims.layers, t)


def _pair(clean: Plan, corrupt: Plan):
    src = _runner(clean)
    clean_config, corrupt_config = clean.config, corrupt.config
    if corrupt_config.model != clean_config.model:
        raise ConfigError("patching needs both inputs on the same model")
    clean_ids, corrupt_ids = _ids(src, clean_config), _ids(src, corrupt_config)
    if len(clean_ids) != len(corrupt_ids):
        raise ConfigError(f"patching needs inputs of the same token count: the clean one has {len(clean_ids)}, "
                          f"the corrupted one {len(corrupt_ids)}")
    return src, clean_ids, corrupt_ids


def clean_z(clean_request: Request, corrupt_request: Request):
    """Every layer's Z (h, n, d_v) on the clean input: the kept run's ``blocks.{l}.attn.hook_z``."""
    clean_plan = as_plan(clean_request)
    src, clean_ids, corrupt_ids = _pair(clean_plan, as_plan(corrupt_request))
    device, dtype = clean_plan.exact_device()
    clean = src.forward(torch.tensor(clean_ids), device, dtype, keep=True)
    kept = clean.activations
    assert kept is not None  # a kept run
    seen = {layer: kept[hook_name(layer, "attn.z")] for layer in range(src.spec.layers)}
    return src, clean, seen, corrupt_ids


def patch(clean_request: Request, corrupt_request: Request, heads) -> Run:
    """Run the corrupted input with the given heads' Z (before W_O) taken from the clean input."""
    clean_plan = as_plan(clean_request)
    heads = check_heads(clean_plan, heads)
    src, _, seen, corrupt_ids = clean_z(clean_plan, corrupt_request)
    device, dtype = clean_plan.exact_device()

    def copy(layer, hs):
        def hook(z):
            z = z.clone()
            z[hs] = seen[layer][hs]
            return z
        return hook
    hooks = z_hooks({layer: copy(layer, hs) for layer, hs in by_layer(heads).items()})
    return Run(src.forward(torch.tensor(corrupt_ids), device, dtype, hooks=hooks).logits, corrupt_ids)


@dataclass(frozen=True)
class Patching:
    """The two inputs' targets (top next tokens) and their logit differences, clean and corrupted."""

    clean_target: int
    corrupt_target: int
    clean_diff: float
    corrupt_diff: float

    def recovered(self, logits: torch.Tensor) -> torch.Tensor:
        """(d - corrupted d) / (clean d - corrupted d), d = logit(clean target) - logit(corrupted target)."""
        d = logits[..., self.clean_target].double() - logits[..., self.corrupt_target].double()
        return (d - self.corrupt_diff) / (self.clean_diff - self.corrupt_diff)


def patching(clean_request: Request, corrupt_request: Request) -> Patching:
    """The targets and logit differences that ``patch_effects`` measures recovery against."""
    clean_plan = as_plan(clean_request)
    src, clean_ids, corrupt_ids = _pair(clean_plan, as_plan(corrupt_request))
    device, dtype = clean_plan.exact_device()
    clean = src.forward(torch.tensor(clean_ids), device, dtype).logits.double()
    corrupt = src.forward(torch.tensor(corrupt_ids), device, dtype).logits.double()
    a, b = int(clean.argmax()), int(corrupt.argmax())
    if a == b:
        raise ConfigError(f"both inputs predict {src.token_text(a)!r} next: "
                          "choose a corrupted input that changes the prediction")
    return Patching(a, b, float(clean[a] - clean[b]), float(corrupt[a] - corrupt[b]))


def patch_effects(clean_request: Request, corrupt_request: Request,
                  cancelled: Callable[[], bool] | None = None) -> Iterator[Grid]:
    """The recovered fraction of the logit difference when each head alone is patched, a (L, h) grid.

    Yields a ``Grid`` after each layer, as ``head_effects``; 1 means the head alone restores the
    clean prediction's margin, 0 that it changes nothing.
    """
    clean, corrupt = as_plan(clean_request), as_plan(corrupt_request)
    measure = patching(clean, corrupt)
    src, _, seen, corrupt_ids = clean_z(clean, corrupt)
    dims = src.spec
    values = torch.full((dims.layers, dims.heads), float("nan"), dtype=torch.float64)

    def hook_for(layer, pick):
        m = _masked(pick)
        return lambda z: z * (1 - m) + seen[layer] * m
    for layer, layer_logits in _layer_batches(corrupt, corrupt_ids, hook_for, cancelled):
        values[layer] = measure.recovered(layer_logits).cpu()
        yield Grid(values.clone(), layer + 1, dims.layers)
