"""One plan of the model, resolved once per compute: what every layer's attention does, as this compute runs it.

A config is plain data; the model it names is looked up here, once (``plan(config)``): its spec and
source, the sizes in use, each layer's attention options as the model runs them (scale and its
divisor, soft-cap, window, RoPE with its scaling and rotary fraction; ``model_layers``), its norms'
gain convention and residual wiring (``norm``, ``block``), and the options of the config that make
this compute differ from the model's own (``what_if``). ``compute`` builds the plan and the result
carries it; every view (why scaling, the walk, the formulas, a row recomputed, attribution,
circuits, interventions, the corpus census, the lessons) reads the plan and the captured tensors,
never the config's fields or the model's spec again.

An option a model's forward does not have (``Option.model == "what-if"``: scaling off, a temperature,
cosine similarity, a causal mask on an encoder, a narrower window, sink tokens) is applied to every
layer of the model's forward, so that the maps, the model view and the next tokens all come from the
same modified forward, and the plan names it (``what_if``); the window and the result's notes say so.
Where a path cannot run it (a model read through transformers, a long input streamed, ablation), it
is refused in one line (``check``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .kernel.types import AttendOptions
from .config.config import OPTIONS, WHAT_IF, AttentionConfig, Dims
from .base.errors import ConfigError
from .sources import model_spec, source
from .sources.layers import model_layers
from .specs.spec import ModelSpec

if TYPE_CHECKING:
    from .sources.base import ModelSource

# A model's input up to this many tokens is never streamed (every layer's alpha is kept); past it a decoder
# without soft-capped scores streams when the caller displays fewer (``Plan.reduce_to``).
MODEL_FULL = 512


def random_options(config: AttentionConfig) -> AttendOptions:
    """The options ``attend`` runs random weights with: every one is the config's own."""
    return AttendOptions(layout=config.layout, scale=config.scale, temperature=config.temperature,
                         causal=config.causal, similarity=config.similarity,
                         rope_base=config.rope_base if config.positional == "rope" else None,
                         alibi=config.positional == "alibi", position_offset=config.position_offset,
                         window=config.window, sink_tokens=config.sink_tokens)


def _narrower(own: int | None, window: int | None) -> int | None:
    windows = [w for w in (own, window) if w is not None]
    return min(windows) if windows else None


def what_if(options: AttendOptions, config: AttentionConfig) -> AttendOptions:
    """A model layer's own ``options`` with the config's what-if options applied (``Option.model == "what-if"``):
    scaling off, a further temperature, cosine similarity, a causal mask, a narrower window, sink tokens."""
    return options.replace(scale=options.scale and config.scale, temperature=options.temperature * config.temperature,
                           similarity=config.similarity, causal=options.causal or config.causal,
                           window=_narrower(options.window, config.window),
                           sink_tokens=config.sink_tokens if options.window is not None or config.window is not None
                           else options.sink_tokens)


@dataclass(frozen=True)
class Plan:
    """One compute's model, resolved once.

    Attributes
    ----------
    config : AttentionConfig
        The request.
    spec : ModelSpec or None
        The model's facts; None for random weights.
    dims : Dims
        The sizes in use: the model's in model mode, else the config's.
    layers : tuple of AttendOptions
        Each layer's attention options as this compute runs them (the what-if options applied; random weights:
        one layer, the config's), in the model's column layout (random weights: the config's layout).
    own : tuple of AttendOptions
        Each layer's options as the model runs them (``layers`` without the what-ifs).
    what_if : tuple of str
        The config's options that change this compute from the model's own (``OPTIONS`` names), in declaration
        order; () for random weights and a model run as it is.
    norm : str
        The model's norm and its gain convention: "rms" (x̂ γ), "gemma" (x̂ (1 + γ), γ stored zero-centred),
        "layer" (LayerNorm, (x - μ)/σ γ + β); "" for random weights.
    block : str
        The residual wiring of a decoder layer (``sources.llama.BLOCKS``): "pre", "parallel", "sandwich" or
        "post"; an encoder's "post_ln" or "pre_ln"; "" for random weights.
    """

    config: AttentionConfig
    spec: ModelSpec | None
    dims: Dims
    layers: tuple[AttendOptions, ...]
    own: tuple[AttendOptions, ...]
    what_if: tuple[str, ...] = ()
    norm: str = ""
    block: str = ""

    @property
    def model(self) -> str | None:
        """The config's model name, None for random weights."""
        return self.config.model

    @property
    def source(self) -> ModelSource:
        """The model's source (``sources.source``); model mode only."""
        if self.config.model is None:
            raise ValueError("random weights have no model source")
        return source(self.config.model)

    @property
    def layer(self) -> int:
        """The layer shown (0 for random weights)."""
        return self.config.layer

    @property
    def shown(self) -> AttendOptions:
        """The shown layer's options as this compute runs it, in the config's layout."""
        return self.layers[self.layer].replace(layout=self.config.layout)

    @property
    def causal(self) -> bool:
        """Whether the shown layer masks the keys after each query."""
        return self.shown.causal

    @property
    def decoder(self) -> bool:
        """A model that predicts the next token (a causal model run here or through transformers)."""
        return self.spec is not None and self.spec.causal

    def divisor(self, layer: int | None = None) -> float:
        """What layer ``layer``'s (default: the shown layer's) scores are divided by (``AttendOptions.divisor``)."""
        return self.layers[self.layer if layer is None else layer].divisor(self.dims.d_k)

    def what_if_text(self) -> str:
        """One line naming the what-if options and their values ("" when the model runs as it is)."""
        if not self.what_if:
            return ""
        shown = ", ".join(f"{OPTIONS[n].label} {_value(getattr(self.config, n))}" for n in self.what_if)
        return (f"what-if: {shown}, in every layer: not the model's own computation (its maps and next tokens "
                f"both come from this changed forward)")

    def reduce_to(self, tokens: int, display_max: int | None) -> int | None:
        """The side the T x T fields are kept pooled to when ``tokens`` exceed ``display_max`` (streamed); None
        when every field is kept whole. A model up to ``MODEL_FULL`` tokens is never streamed; past it only a
        decoder run here without soft-capped scores streams."""
        if display_max is None:
            return None
        if self.spec is None:
            return display_max if tokens > display_max else None
        streams = tokens > max(display_max, MODEL_FULL) and self.streamable
        return display_max if streams else None

    @property
    def streamable(self) -> bool:
        """Whether the model's run streams past ``display_max`` tokens: a decoder without soft-capped scores."""
        return self.spec is not None and self.spec.module == "decoder" and self.spec.softcap is None

    def check(self, *, streamed: bool = False, ablated: bool = False) -> None:
        """Refuse, in one line, a what-if option where this compute's path cannot run it."""
        if not self.what_if or self.spec is None:
            return
        names = ", ".join(self.what_if)
        if self.spec.through:
            raise ConfigError(f"{names}: {self.spec.label} is read through transformers, which runs it as it is; "
                              f"set {names} back to the model's own to show it")
        if streamed:
            raise ConfigError(f"{names}: a what-if runs every layer changed, which a long input's streamed run "
                              "does not; shorten the input or set it back to the model's own")


class Planned:
    """A decoder's source run as a plan says: every forward, prefill and decode step with the plan's layers
    (``Plan.layers``: a what-if in every layer where the plan has one), so that interventions, attribution and
    generation compute what the maps show. Everything else is the source's (``sources.decoder.Source``)."""

    def __init__(self, plan: Plan):
        from .sources.decoder import Source as DecoderSource

        model = plan.source
        if not isinstance(model, DecoderSource):
            raise ConfigError(f"{model.spec.label} is not run by attn-gui's decoder: it has no forward to intervene on")
        self.plan, self.source = plan, model

    def forward(self, token_ids, device, dtype, cache=None, **kwargs):
        """``Source.forward`` with the plan's layers."""
        return self.source.forward(token_ids, device, dtype, cache, layers=self.plan.layers, **kwargs)

    def decoder(self, device, dtype):
        """``Source.decoder``: the weights and the shape with the plan's layers."""
        return self.source.decoder(device, dtype, self.plan.layers)

    def next_tokens(self, token_ids, device, dtype, k: int = 5):
        return self.source.next_tokens(token_ids, device, dtype, k, layers=self.plan.layers)

    def __getattr__(self, name: str):
        return getattr(self.source, name)


def _value(value) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) \
        else str(value)


def _residual(spec: ModelSpec) -> tuple[str, str]:
    """The model's norm convention and residual wiring, as its spec declares them."""
    return spec.norm, spec.block


def plan(config: AttentionConfig) -> Plan:
    """Resolve ``config``'s model once: its spec, sizes, each layer's options and the what-ifs.

    Raises
    ------
    ConfigError
        In one line: a layer or a struck head the model lacks, ablation on an encoder, a model that cannot be read.
    """
    if config.model is None:
        options = random_options(config)
        return Plan(config, None, config.dims, (options,), (options,))
    spec = model_spec(config.model)
    _check_model(config, spec)
    own = model_layers(spec)
    layers = tuple(what_if(o, config) for o in own)
    changed = tuple(name for name in WHAT_IF if _changes(name, config, own, layers))
    norm, block = _residual(spec)
    dims = Dims(spec.d_model, spec.heads, spec.d_k, spec.d_v, True, spec.kv_heads)
    return Plan(config, spec, dims, layers if changed else own, own, changed, norm, block)


def _changes(name: str, config: AttentionConfig, own: tuple[AttendOptions, ...],
             layers: tuple[AttendOptions, ...]) -> bool:
    """Whether what-if option ``name`` changes the plan's ``layers``: set back to its neutral value, with the other
    options as they are, the layers differ (sink tokens change nothing without a window, yet do with one)."""
    neutral = OPTIONS[name].neutral
    if getattr(config, name) == neutral:
        return False
    without = config.replace(**{name: neutral})
    return tuple(what_if(o, without) for o in own) != layers


def check_model(config: AttentionConfig) -> None:
    """Refuse, in one line, a layer or a struck head ``config``'s model lacks (nothing without a model).

    Reads the model's spec only, not its weights: a window calls it on each edit, a session file as it loads.
    """
    if config.model is not None:
        _check_model(config, model_spec(config.model))


def _check_model(config: AttentionConfig, spec: ModelSpec) -> None:
    """What the config asks of the model and the model does not have: a layer, a head to strike, a decoder's
    forward for bfloat16."""
    if config.layer >= spec.layers:  # people count layers from 1; the field, as torch, from 0
        raise ConfigError(f"{spec.label} has layers 1 to {spec.layers} (layer = 0 to {spec.layers - 1} "
                          f"counted from 0); got layer = {config.layer}")
    if config.dtype == "bfloat16" and spec.module != "decoder":
        raise ConfigError(f"bfloat16 matmuls run a decoder's weights; {spec.label} computes in float32 or float64")
    if config.ablate:
        if spec.through:  # transformers runs it: no head of it can be struck here
            raise ConfigError(f"ablate = {config.ablate!r:.40} cannot apply to a model read through transformers: it "
                              f"is shown as transformers runs it (ablate = ())")
        if not spec.causal:
            raise ConfigError(f"ablating heads changes the next token, which {spec.label} (an encoder) does not "
                              f"predict: choose a decoder model (smollm2-135m)")
        for layer, head in config.ablate:
            if layer >= spec.layers or head >= spec.heads:
                raise ConfigError(f"head {layer + 1}.{head + 1} does not exist: {spec.label} has layers 1 to "
                                  f"{spec.layers} and heads 1 to {spec.heads}")


__all__ = ["MODEL_FULL", "Plan", "Planned", "check_model", "model_layers", "plan", "random_options", "what_if"]
