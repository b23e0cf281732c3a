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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..kernel.types import AttendOptions
from ..config.config import OPTIONS, WHAT_IF, AttentionConfig, Dims
from ..base.devices import DTYPES, resolve_device
from ..base.errors import ConfigError
from ..specs.catalog import MODELS
from ..readers.catalog import model_spec
from .registry import source
from ..specs.decoder import model_layers
from ..specs.spec import ModelSpec

if TYPE_CHECKING:
    from .source import ModelSource

# A model's input up to this many tokens is never streamed (every layer's alpha is kept); past it a decoder
# without soft-capped scores streams when the caller displays fewer (``Plan.reduce_to``).
MODEL_FULL = 512

FIRST_MAPS_FROM = 50_000_000  # layers x d_model^2 from which a decoder's first maps come first: 1 B models and up
# (Llama 3.2 1B: 16 x 2048^2 = 67 M; Llama 3 8B: 537 M). Below, as SmolLM2-135M (30 x 576^2 = 10 M), the
# whole run takes about a second on a CPU, and two frames in a row would only flicker.

LM_HEAD = "lm_head: its folder was saved from AutoModel"


@dataclass(frozen=True)
class Capabilities:
    """What a model can do here, decided once from its spec (``capabilities``); every dock, command and analysis
    reads this row instead of testing the spec, the source's class or its methods.

    Two facts are the weights' and are checked where the weights are loaded (``Plan.refusal``): a language-model
    head (lm_head) for next tokens, generation, interventions and attribution; a tokenizer that ends every text
    with its end token (add_eos_token) for generation; a logit soft-cap for the census's next-token attribution.

    Attributes
    ----------
    maps : bool
        Attention maps: every model and random weights.
    next_tokens : bool
        A causal model: it predicts the next token (run here or through transformers).
    generate : bool
        A decoder run by attn-gui's forward: the key/value cache steps through it.
    intervene : bool
        A decoder run by attn-gui's forward, whose hooks reach each head's Z: ablation, patching, attribution,
        circuits.
    attribute : bool
        ``intervene``, and no norm after the attention block between a head and the logit: the census's per-position
        next-token attribution (``dla``).
    stream : bool
        A long input's run streams past the display's size: a decoder run here without soft-capped scores.
    first_maps : bool
        A decoder run here large enough that its shown layer's maps come first (``FIRST_MAPS_FROM``).
    decoder : bool
        Run by attn-gui's own decoder forward (its kept and streamed runs, summaries).
    captured : bool
        Read through transformers: its maps are captured from transformers' forward.
    reasons : tuple of (str, str)
        (capability, why not) for each False one, in field order (``why_not`` as a mapping); a tuple, so that a
        plan stays hashable and picklable.
    """

    maps: bool = True
    next_tokens: bool = False
    generate: bool = False
    intervene: bool = False
    attribute: bool = False
    stream: bool = False
    first_maps: bool = False
    decoder: bool = False
    captured: bool = False
    reasons: tuple[tuple[str, str], ...] = ()

    @property
    def why_not(self) -> Mapping[str, str]:
        """One line per False capability (its field's name), why not."""
        return dict(self.reasons)

    def refuse(self, what: str) -> None:
        """Raise ``ConfigError`` with the one line of ``why_not[what]`` where ``what`` is False."""
        if not getattr(self, what):
            raise ConfigError(self.why_not[what])


def capabilities(spec: ModelSpec | None) -> Capabilities:
    """The capabilities of a model of ``spec`` (None: random weights), with one line per one it lacks."""
    from ..specs.wiring import BLOCKS

    name = "random weights" if spec is None else spec.label
    causal = spec is not None and spec.causal
    through = spec is not None and bool(spec.through)
    decoder = spec is not None and spec.module == "decoder" and causal
    sandwich = spec is not None and decoder and BLOCKS[spec.block].attn_post is not None
    large = spec is not None and spec.layers * spec.d_model ** 2 >= FIRST_MAPS_FROM
    can = dict(next_tokens=causal, generate=decoder, intervene=decoder, attribute=decoder and not sandwich,
               stream=decoder and spec is not None and spec.softcap is None, decoder=decoder, captured=through,
               first_maps=decoder and large)
    decoders = ", ".join(n for n, s in MODELS.items() if s.causal)
    encoder = f"{name} is an encoder: it predicts no next token" if spec is not None \
        else "random weights predict no next token"
    why = {"next_tokens": encoder,
           "generate": f"{name} is read through transformers: attn-gui shows its attention and next tokens, and "
                       "generates through the key/value cache of the models it runs itself" if through else
                       f"{name if spec is None else spec.label + ', an encoder,'} cannot generate; "
                       f"choose a decoder model ({decoders})",
           "intervene": f"interventions need a decoder model (smollm2-135m); "
                        f"{spec.name if spec else name} has no next token to change" if not causal else
                        f"interventions change a head's output Z before W_O inside attn-gui's own forward; "
                        f"{name} runs in transformers, whose hooks here only read it",
           "attribute": encoder if not causal else
                        f"{name} runs in transformers, where attn-gui's hooks read no head's write to the residual "
                        "stream" if through else
                        "a norm after each attention block (Gemma 2's sandwich, OLMo 2's) stands between a head and "
                        "the logit",
           "stream": f"{name}: every layer's maps are kept; only a decoder run here without soft-capped scores streams",
           "first_maps": f"{name}: the maps come in one frame; only a large decoder run here shows its layer first",
           "decoder": f"{name} is not run by attn-gui's decoder: it has no forward to intervene on",
           "captured": f"{name} is not read through transformers"}
    return Capabilities(**can, reasons=tuple((k, v) for k, v in why.items() if not can[k]))


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
    can : Capabilities
        What the model can do here (``capabilities``): every "is it a decoder, can it generate?" reads this.
    """

    config: AttentionConfig
    spec: ModelSpec | None
    dims: Dims
    layers: tuple[AttendOptions, ...]
    own: tuple[AttendOptions, ...]
    what_if: tuple[str, ...] = ()
    can: Capabilities = Capabilities()

    @property
    def model(self) -> str | None:
        """The config's model name, None for random weights."""
        return self.config.model

    @property
    def source(self) -> ModelSource:
        """The model's source (``model.registry.source``); model mode only."""
        if self.config.model is None:
            raise ValueError("random weights have no model source")
        return source(self.config.model)

    @property
    def facts(self) -> ModelSpec:
        """The model's spec (``spec``), model mode only: what the analyses of a model read."""
        if self.spec is None:
            raise ValueError("random weights have no model spec")
        return self.spec

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
        streams = tokens > max(display_max, MODEL_FULL) and self.can.stream
        return display_max if streams else None

    def refusal(self, what: str) -> str | None:
        """Why the model cannot do ``what`` (a ``Capabilities`` field), in one line, or None where it can: the row's
        answer, then for a decoder the weights' (loads the model): no lm_head for next tokens, generation,
        interventions and attribution; add_eos_token for generation; soft-capped logits for attribution."""
        if not getattr(self.can, what):
            return self.can.why_not[what]
        if what not in ("next_tokens", "generate", "intervene", "attribute") or not self.can.decoder:
            return None
        src = Planned(self)
        label = self.spec.label if self.spec is not None else ""
        if what == "attribute":
            return next_token_refusal(src.decoder("cpu", torch.float32)[1], src.predicts())
        if not src.predicts():
            return (f"interventions need a model's next token; {label} has no language-model head ({LM_HEAD})"
                    if what == "intervene" else f"{label} has no language-model head ({LM_HEAD}), so it shows "
                    "attention but cannot predict or generate")
        end = src.ends_text() if what == "generate" else None
        if end is not None:  # the one place add_eos_token is refused: llama.cpp's llama-cli asserts it off to generate
            return (f"{label} ends every text with {end} (add_eos_token), so a continuation would follow the end of "
                    "the text: it shows attention and next tokens but does not generate, as llama.cpp does not")
        return None

    def runner(self, what: str = "intervene") -> Planned:
        """The model's source as this plan runs it (``Planned``), refusing in one line what it cannot do
        (``refusal``): the one way an analysis, a generation or an intervention gets a decoder."""
        why = self.refusal(what)
        if why is not None:
            raise ConfigError(why)
        return Planned(self)

    def exact_device(self):
        """The device and dtype the grids and attribution compute in; bfloat16 refused in one line: their exact
        sums and their batched runs (``torch.vmap``, which the int4 kernel has no rule for) are float32's or
        float64's."""
        if self.config.dtype == "bfloat16":
            raise ConfigError("interventions and attribution compute in float32 or float64; bfloat16 matmuls are "
                              "for the maps and the next tokens (choose dtype float32)")
        return resolve_device(self.config.device), DTYPES[self.config.dtype]

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
    generation compute what the maps show. Everything else is the source's (``model.decoder.source.Source``)."""

    def __init__(self, plan: Plan):
        from .decoder.source import Source as DecoderSource

        plan.can.refuse("decoder")
        model = plan.source
        assert isinstance(model, DecoderSource)  # ``Capabilities.decoder``: the spec's module is the decoder's
        self.plan, self.source = plan, model

    def forward(self, token_ids, device, dtype, cache=None, **kwargs):
        """``Source.forward`` with the plan's layers."""
        return self.source.forward(token_ids, device, dtype, cache, layers=self.plan.layers, **kwargs)

    def decoder(self, device, dtype):
        """``Source.decoder``: the weights and the shape with the plan's layers."""
        return self.source.decoder(device, dtype, self.plan.layers)

    def next_tokens(self, token_ids, device, dtype, k: int = 5):
        return self.source.next_tokens(token_ids, device, dtype, k, layers=self.plan.layers)

    def prefilled(self, token_ids, device, dtype):
        """The whole run over ``token_ids`` (n,) with the plan's layers and no hooks: the one the window's maps
        were made from where it is still kept (``decoder.source.prefill``), else run now and kept."""
        from .decoder.source import prefill

        return prefill(self.source.spec, tuple(token_ids.tolist()), str(device), dtype, self.plan.layers)

    def __getattr__(self, name: str):
        return getattr(self.source, name)


def next_token_refusal(shape, predicts: bool = True) -> str | None:
    """Why ``next_token_attribution`` cannot split a decoder of ``shape`` (one line), or None where it can."""
    if not predicts:
        return "the model has no language-model head (lm_head), so no next-token logit"
    from ..specs.wiring import BLOCKS

    if BLOCKS[shape.block].attn_post is not None:
        return "a norm after each attention block (Gemma 2's sandwich, OLMo 2's) stands between a head and the logit"
    if shape.final_softcap is not None:
        return "its logits are soft-capped (final_logit_softcapping), which no sum of head terms gives"
    return None


Request = AttentionConfig | Plan  # what an analysis takes: a plan, or a config to plan once (the public API)


def as_plan(request: Request) -> Plan:
    """``request`` itself where it is a plan, else its plan (``plan``): an analysis plans once, at its entry."""
    return request if isinstance(request, Plan) else plan(request)


def _value(value) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) \
        else str(value)


def plan(config: AttentionConfig) -> Plan:
    """Resolve ``config``'s model once: its spec, sizes, each layer's options and the what-ifs.

    Raises
    ------
    ConfigError
        In one line: a layer or a struck head the model lacks, ablation on an encoder, a model that cannot be read.
    """
    if config.model is None:
        options = random_options(config)
        return Plan(config, None, config.dims, (options,), (options,), can=capabilities(None))
    spec = model_spec(config.model)
    _check_model(config, spec)
    own = model_layers(spec)
    layers = tuple(what_if(o, config) for o in own)
    changed = tuple(name for name in WHAT_IF if _changes(name, config, own, layers))
    dims = Dims(spec.d_model, spec.heads, spec.d_k, spec.d_v, True, spec.kv_heads)
    return Plan(config, spec, dims, layers if changed else own, own, changed, capabilities(spec))


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


__all__ = ["FIRST_MAPS_FROM", "MODEL_FULL", "Capabilities", "Plan", "Planned", "Request", "as_plan", "capabilities",
           "check_model", "model_layers", "next_token_refusal", "plan", "random_options", "what_if"]
