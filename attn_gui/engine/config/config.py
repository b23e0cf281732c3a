"""The frozen, validated description of one attention computation.

Every field is declared once (``option(...)``): its kind, range, labels, the mode where it has an
effect and what a model's forward makes of it. Construction only checks plain values; it reads no
files, tokenizes nothing and never changes a field. What needs the model (its layers, heads, each
layer's attention as it runs it, the what-ifs) is resolved once per compute by ``engine.plan``; what
needs the tokens (their count, the model's token limit) by ``inputs.check_tokens`` and ``compute``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..base.errors import ConfigError
from .options import BOTH, MODEL, RANDOM, Option, _short, declared_options, option
from ..specs.catalog import MODELS

DEFAULT_SENTENCE = "When in doubt look intelligent"
MAX_CHARS = 1_000_000
MAX_SEED = 2**63 - 1
MAX_LAYERS = 1024  # more than any released model has (Llama 3.1 405B: 126)
# init "auto": torch.rand's weights (the tutorials', all positive) up to this d_model, normal / sqrt(fan_in)
# above it. Measured on a 17-word sentence, seeds 0-4, rows with max α > 0.95: rand 1 % at d 5, 6 % at d 8,
# 24 % at d 12, 39 % at d 16, 76 % at d 64 (4 heads); normal / sqrt(fan_in) at most 1 % at every size.
AUTO_UNIFORM_MAX = 8
RANDOM_ONLY = frozenset({RANDOM})
MODEL_ONLY = frozenset({MODEL})
# what dtype "bfloat16" gives against float32, measured (tools/bfloat16_error.py; docs/benchmarks.md, "bfloat16
# matmuls against float32"): the largest α and logit differences over SmolLM2-135M and tiny Q4_0, Q8_0, Q4_K files
BFLOAT16_ERROR = ("α up to 0.07 off float32's, the logits up to 0.022 of the largest, the same top next token in "
                  "20 of 20 sentences (docs/benchmarks.md)")
BFLOAT16_NOTE = ("bfloat16 matmuls: every layer's α, this map's and the model view's, from one forward: x W for "
                 "q, k, v and W_O in bfloat16, the scores, softmax and the rest in float32; " + BFLOAT16_ERROR)


@dataclass(frozen=True)
class Dims:
    """The sizes a computation really uses: the model's in model mode, else the config's.

    Without projections q = k = v = x, so d_k = d_v = d_model.
    """

    d_model: int
    heads: int
    d_k: int
    d_v: int
    projections: bool
    kv_heads: int | None = None  # key/value heads; None: as many as heads

    def __post_init__(self) -> None:
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)


@dataclass(frozen=True)
class AttentionConfig:
    """Everything that decides the numbers of one self-attention computation.

    Construction validates every field against its declaration (``OPTIONS``) and raises
    ``ConfigError`` with a message a person can act on. In model mode the random-only
    fields keep their values and have no effect; ``dims`` gives the sizes in use.
    """

    sentence: str = option(DEFAULT_SENTENCE, kind="text", hi=MAX_CHARS, label="sentence", model="input",
                           help="The text to attend over.")
    source_sentence: str | None = option(None, kind="text", hi=MAX_CHARS, nullable=True, label="second sentence",
                                         modes=RANDOM_ONLY,
                                         help="Cross-attention: keys and values from this second sentence, "
                                              "queries from the sentence; none or empty is self-attention.")
    tokenizer: str = option("word", kind="choice", label="tokens", modes=RANDOM_ONLY,
                            choices=(("word", "words"), ("char", "characters")),
                            help="How the sentence is split into tokens.")
    d_model: int = option(5, kind="int", lo=1, hi=8192, label="d_model", modes=RANDOM_ONLY,
                          help="Embedding size d of each token.")
    d_k: int = option(3, kind="int", lo=1, hi=4096, label="d_k", modes=RANDOM_ONLY,
                      help="Per-head query and key size d_q = d_k.")
    d_v: int = option(3, kind="int", lo=1, hi=4096, label="d_v", modes=RANDOM_ONLY,
                      help="Per-head value size d_v.")
    heads: int = option(1, kind="int", lo=1, hi=128, label="heads", modes=RANDOM_ONLY,
                        help="Number of attention heads h.")
    seed: int = option(123, kind="int", lo=0, hi=MAX_SEED, label="seed", modes=RANDOM_ONLY,
                       help="Seed of the inputs X (and of the weights when there is no weight seed).")
    weight_seed: int | None = option(None, kind="int", lo=0, hi=MAX_SEED, nullable=True, label="weight seed",
                                     modes=RANDOM_ONLY,
                                     help="Seed of the projections; none uses the seed (stable inputs: a "
                                          "generator of their own; embedding, uniform: the inputs' stream, "
                                          "continued).")
    inputs: str = option("stable", kind="choice", label="inputs", modes=RANDOM_ONLY,
                         choices=(("stable", "one row per (seed, token)"),
                                  ("embedding", "embedding table N(0,1)"), ("uniform", "uniform rand(T, d)")),
                         help="Where X comes from: an N(0,1) row per token drawn from (seed, token) alone, so "
                              "a new word changes no other row and no weight (stable); rows of a seeded table "
                              "over the sorted vocabulary, the weights continuing its stream (embedding, the "
                              "tutorials'); or uniform noise per position (uniform).")
    projections: bool = option(True, kind="bool", label="projections W_q, W_k, W_v", modes=RANDOM_ONLY,
                               help="Project X into queries, keys and values; off means q = k = v = x.")
    positional: str = option("none", kind="choice", label="positions", modes=RANDOM_ONLY, bare="sinusoidal",
                             choices=(("none", "none"), ("sinusoidal", "sinusoidal, added to X"),
                                      ("rope", "RoPE, rotating q and k"), ("alibi", "ALiBi, a bias on the scores")),
                             help="How positions enter: added to X (sinusoidal), rotating q and k (RoPE), "
                                  "or a linear bias on the scores (ALiBi).")
    position_offset: int = option(0, kind="int", lo=0, hi=2**20, label="position offset", modes=RANDOM_ONLY,
                                  help="The position of the first token (sinusoidal, RoPE, ALiBi): shift the "
                                       "sentence to see which numbers depend on absolute positions.")
    rope_base: float = option(10000.0, kind="float", lo=1.0, hi=1e9, decimals=4, label="RoPE base",
                              modes=RANDOM_ONLY, help="The base of RoPE's frequencies base^(-2i/d_k).")
    init: str = option("auto", kind="choice", label="init", modes=RANDOM_ONLY,
                       choices=(("auto", f"auto: uniform up to d_model {AUTO_UNIFORM_MAX}, then normal"),
                                ("uniform", "uniform rand (tutorials)"), ("scaled_normal", "normal / sqrt(fan_in)"),
                                ("linear", "nn.Linear: uniform ±1/sqrt(fan_in)")),
                       help="How the projection weights (and biases) are drawn. auto: the tutorials' uniform "
                            f"rand up to d_model {AUTO_UNIFORM_MAX}; above it normal / sqrt(fan_in), since rand's "
                            "all-positive weights make α one-hot on most rows from d_model 16 on.")
    bias: bool = option(False, kind="bool", label="biases b_q, b_k, b_v, b_O", modes=RANDOM_ONLY,
                        help="Projections with biases, drawn after the weights.")
    kv_heads: int | None = option(None, kind="int", lo=1, hi=128, nullable=True, label="K/V heads",
                                  modes=RANDOM_ONLY,
                                  help="Key/value heads, each shared by heads / kv_heads query heads "
                                       "(grouped-query; 1 is multi-query); none means one per head.")
    layout: str = option("row", kind="choice", label="layout", model="run",
                         choices=(("row", "q = x·W   (W is d × d_k)"), ("column", "q = W·x   (W is d_k × d)")),
                         help="Whether W multiplies x from the right (q = x W) or the left (q = W x).")
    scale: bool = option(True, kind="bool", label="scale by √d_k", model="what-if",
                         help="Divide the scores by the square root of d_k.")
    temperature: float = option(1.0, kind="float", lo=0.01, hi=100, decimals=4, label="temperature",
                                model="what-if",
                                help="Further divide the scores by this number.")
    causal: bool = option(False, kind="bool", label="causal mask", model="what-if",
                          help="Mask the keys after each query.")
    window: int | None = option(None, kind="int", lo=1, hi=2**20, nullable=True, label="window", model="what-if",
                                help="Sliding window: each query sees the keys less than this many positions "
                                     "away (causal: itself and the window - 1 before it); none sees all.")
    sink_tokens: int = option(0, kind="int", lo=0, hi=2**20, label="sink tokens", model="what-if",
                              help="The first keys that stay visible whatever the window (attention sinks).")
    similarity: str = option("dot", kind="choice", label="similarity", model="what-if",
                             choices=(("dot", "dot product"), ("cosine", "cosine")),
                             help="How a query is compared with a key.")
    device: str = option("cpu", kind="device", label="device", model="run",
                         help="Where the compute runs: cpu, cuda, cuda:N or mps.")
    dtype: str = option("float32", kind="choice", label="dtype", model="run",
                        choices=(("bfloat16", "bfloat16 matmuls"), ("float32", "float32"), ("float64", "float64")),
                        help="Floating-point precision of the compute. bfloat16: a decoder model's weight matmuls "
                             "in bfloat16 on its stored weights, on the CPU (PyTorch's int4 kernels for a 4-bit "
                             "GGUF), several times faster; the rest in float32: " + BFLOAT16_ERROR + ".")
    model: str | None = option(None, kind="model", nullable=True, label="weights", model="model",
                               choices=((None, "random weights (seeded)"),
                                        *((name, spec.label) for name, spec in MODELS.items())),
                               help="A pretrained model instead of random weights.")
    # any model's layer count bounds it (__post_init__); a folder's is known only from its config.json
    layer: int = option(0, kind="int", lo=0, hi=MAX_LAYERS - 1, label="layer",
                        modes=MODEL_ONLY, ordinal=True, model="model",
                        help="The model's layer to show; X is the hidden state entering it.")
    ablate: tuple[tuple[int, int], ...] = option((), kind="heads", label="ablated heads", modes=MODEL_ONLY,
                                                 model="model",
                                                 help="Heads knocked out (their Z zeroed before W_O), as "
                                                      "layer.head counted from 1: 5.3,12.1; decoder models only.")

    def __post_init__(self) -> None:
        for opt in OPTIONS.values():
            opt.check(getattr(self, opt.name))
        if self.device == "mps" and self.dtype == "float64":
            raise ConfigError("float64 is not supported on MPS; choose float32")
        if self.dtype == "bfloat16":
            _check_bfloat16(self)
        if self.model is None:
            if self.layer != 0:
                raise ConfigError("layer is only used with a pretrained model")
            if not self.projections and self.heads != 1:
                raise ConfigError("without projections every head would be the same (q = k = v = x); use 1 head")
            if self.kv_heads is not None and (self.kv_heads > self.heads or self.heads % self.kv_heads):
                raise ConfigError(f"kv_heads must divide heads ({self.heads}); got {self.kv_heads}")
            if self.bias and not self.projections:
                raise ConfigError("biases need projections (b_q, b_k, b_v and b_O are added to them)")
            if self.positional == "rope" and self.dims.d_k % 2:
                raise ConfigError(f"RoPE rotates pairs of dimensions: d_k must be even; got {self.dims.d_k}")
            if self.cross:
                _check_cross(self)
            if self.ablate:
                raise ConfigError("ablating heads needs a decoder model (choose smollm2-135m)")

    @property
    def dims(self) -> Dims:
        """The sizes in use: the model's fixed sizes in model mode (its spec, ``engine.plan``), else this config's."""
        if self.model is not None:
            from ..readers.catalog import model_spec

            s = model_spec(self.model)
            return Dims(s.d_model, s.heads, s.d_k, s.d_v, True, s.kv_heads)
        if not self.projections:
            return Dims(self.d_model, self.heads, self.d_model, self.d_model, False)
        return Dims(self.d_model, self.heads, self.d_k, self.d_v, True, self.kv_heads)

    @property
    def drawn_init(self) -> str:
        """The init the weights are drawn with: ``init``, with "auto" resolved by ``d_model``."""
        if self.init != "auto":
            return self.init
        return "uniform" if self.d_model <= AUTO_UNIFORM_MAX else "scaled_normal"

    @property
    def cross(self) -> bool:
        """True for cross-attention: random weights and a second sentence that is not blank."""
        return self.model is None and self.source_sentence is not None and bool(self.source_sentence.strip())

    @property
    def mode(self) -> str:
        """"model" with a pretrained model, else "random"."""
        return RANDOM if self.model is None else MODEL

    def replace(self, **changes: Any) -> AttentionConfig:
        """A copy with ``changes`` applied (validated like any new config)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field (the struck heads as lists, as JSON reads them back)."""
        return {**dataclasses.asdict(self), "ablate": [list(pair) for pair in self.ablate]}

    @classmethod
    def from_dict(cls, data: Any) -> AttentionConfig:
        """Build a config from a dict such as ``to_dict`` gives; unknown keys are an error."""
        if not isinstance(data, dict):
            raise ConfigError("a config must be a mapping of field names to values")
        unknown = sorted(_short(k) for k in data if k not in OPTIONS)
        if unknown:
            raise ConfigError(f"unknown config field(s): {', '.join(unknown[:5])}")
        values = dict(data)
        if isinstance(values.get("positional"), bool):  # sessions before RoPE and ALiBi: a checkbox
            values["positional"] = "sinusoidal" if values["positional"] else "none"
        for name, opt in OPTIONS.items():
            v = values.get(name)
            # JSON writes 2.0 as 2; a whole number in range is the same float
            if opt.kind == "heads" and isinstance(v, list):  # JSON writes tuples as lists
                values[name] = tuple(tuple(p) if isinstance(p, list) else p for p in v)
            if (opt.kind == "float" and isinstance(v, int) and not isinstance(v, bool) and opt.lo is not None
                    and opt.hi is not None and opt.lo <= v <= opt.hi):
                values[name] = float(v)
        return cls(**values)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(OPTIONS)


def _check_bfloat16(config: AttentionConfig) -> None:
    """Refuse, in one line, bfloat16 where it is not run: random weights, another device than the CPU (an encoder
    is refused by the plan, which reads the model's spec: ``plan.check_model``)."""
    if config.model is None:
        raise ConfigError("bfloat16 is for a decoder model's weight matmuls; random weights compute in float32 or "
                          "float64")
    if not config.device.startswith("cpu"):
        raise ConfigError(f"bfloat16 matmuls run on the CPU; on {config.device} choose float32")


def _check_cross(config: AttentionConfig) -> None:
    """Refuse what is defined over one sentence's positions only, with a second sentence.

    The queries and the keys then sit in two sequences, so a key is never "after" a query and
    i - j compares positions of two different texts. Encoder-decoder cross-attention has no
    causal mask (the Transformer's decoder, T5, BART, Whisper), and the models that use RoPE,
    ALiBi or sliding windows apply them in self-attention only (T5's relative bias and Mllama's
    rotary embedding are left out of their cross-attention layers). Sinusoidal positions are
    added to each sentence's X, as the Transformer adds them to the encoder's and the decoder's inputs.
    """
    why = "with a second sentence (cross-attention) the keys are another text's tokens"
    if config.causal:
        raise ConfigError(f"the causal mask hides keys after the query; {why}, so none comes after: "
                          f"turn causal off or empty the second sentence")
    if config.window is not None:
        raise ConfigError(f"a sliding window keeps the keys near each query's position; {why}: "
                          f"set the window to none or empty the second sentence")
    if config.positional in ("rope", "alibi"):
        name = "RoPE" if config.positional == "rope" else "ALiBi"
        raise ConfigError(f"{name} makes a score depend on i - j within one text; {why}: "
                          f"choose positions none or sinusoidal, or empty the second sentence")


OPTIONS: dict[str, Option] = declared_options(AttentionConfig)

# Views of the declarations, for callers that want one aspect.
# The options a model's forward does not have, run as a labelled what-if in model mode (``engine.plan``).
WHAT_IF: tuple[str, ...] = tuple(n for n, o in OPTIONS.items() if o.model == "what-if")
CHOICES: dict[str, tuple[str, ...]] = {n: o.values for n, o in OPTIONS.items() if o.kind == "choice"}
LIMITS: dict[str, tuple[int, int]] = {n: (o.lo, o.hi) for n, o in OPTIONS.items()
                                      if o.kind == "int" and isinstance(o.lo, int) and isinstance(o.hi, int)}


__all__ = ["AttentionConfig", "BOTH", "CHOICES", "DEFAULT_SENTENCE", "Dims", "LIMITS", "MAX_CHARS", "OPTIONS",
           "Option", "WHAT_IF"]
