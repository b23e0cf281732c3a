"""The frozen, validated description of one attention computation."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

from .tokens import TOKENIZERS, tokenize

DEFAULT_SENTENCE = "When in doubt look intelligent"

CHOICES: dict[str, tuple[str, ...]] = {
    "tokenizer": TOKENIZERS,
    "inputs": ("embedding", "uniform"),
    "init": ("uniform", "scaled_normal"),
    "layout": ("row", "column"),
    "similarity": ("dot", "cosine"),
    "dtype": ("float32", "float64"),
}

# Inclusive ranges for the integer fields. Large enough for real model sizes,
# small enough that a typo cannot ask for terabytes before the memory check runs.
LIMITS: dict[str, tuple[int, int]] = {
    "d_model": (1, 8192),
    "d_k": (1, 4096),
    "d_v": (1, 4096),
    "heads": (1, 128),
    "seed": (0, 2**63 - 1),
    "weight_seed": (0, 2**63 - 1),
}

MAX_CHARS = 1_000_000
_DEVICE_RE = re.compile(r"^(cpu|mps|cuda(:\d+)?)$")


def _short(value: Any) -> str:
    """repr() cut to a readable length, so a hostile value cannot flood a message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _finite(x: float) -> bool:
    try:
        return math.isfinite(x)
    except OverflowError:  # an int too large for a float
        return False


@dataclass(frozen=True)
class AttentionConfig:
    """Everything that decides the numbers of one self-attention computation.

    Construction validates every field and raises ``ValueError`` with a message
    a person can act on. See the README for the meaning of each field.
    """

    sentence: str = DEFAULT_SENTENCE
    tokenizer: str = "word"
    d_model: int = 5
    d_k: int = 3
    d_v: int = 3
    heads: int = 1
    seed: int = 123
    weight_seed: int | None = None
    inputs: str = "embedding"
    projections: bool = True
    positional: bool = False
    init: str = "uniform"
    layout: str = "row"
    scale: bool = True
    temperature: float = 1.0
    causal: bool = False
    similarity: str = "dot"
    device: str = "cpu"
    dtype: str = "float32"
    model: str | None = None
    layer: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.sentence, str):
            raise ValueError("sentence must be text")
        if len(self.sentence) > MAX_CHARS:
            raise ValueError(
                f"the sentence is {len(self.sentence):,} characters; the limit is {MAX_CHARS:,}"
            )
        for name, choices in CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}; got {_short(value)}")
        for name, (lo, hi) in LIMITS.items():
            value = getattr(self, name)
            if name == "weight_seed" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be a whole number; got {_short(value)}")
            if not lo <= value <= hi:
                raise ValueError(f"{name} must be between {lo} and {hi}; got {value}")
        for name in ("projections", "positional", "scale", "causal"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false; got {_short(getattr(self, name))}")
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not _finite(t) or t <= 0:
            raise ValueError(f"temperature must be a positive number; got {_short(t)}")
        if not isinstance(self.device, str) or not _DEVICE_RE.match(self.device):
            raise ValueError(f"device must be cpu, cuda, cuda:N or mps; got {_short(self.device)}")
        if self.device == "mps" and self.dtype == "float64":
            raise ValueError("float64 is not supported on MPS; choose float32")
        self._check_model()
        if not self.projections and self.heads != 1:
            raise ValueError("without projections every head would be the same (q = k = v = x); use 1 head")
        if not self.tokens:
            raise ValueError("the sentence has no tokens: type at least one word")

    def _check_model(self) -> None:
        if isinstance(self.layer, bool) or not isinstance(self.layer, int):
            raise ValueError(f"layer must be a whole number; got {_short(self.layer)}")
        if self.model is None:
            if self.layer != 0:
                raise ValueError("layer is only used with a pretrained model")
            return
        from .pretrained import MODELS

        spec = MODELS.get(self.model) if isinstance(self.model, str) else None
        if spec is None:
            raise ValueError(f"model must be one of {', '.join(MODELS)} or none; got {_short(self.model)}")
        if not 0 <= self.layer < spec.layers:
            raise ValueError(f"{spec.label} has layers 0 to {spec.layers - 1}; got {self.layer}")
        # The model fixes its sizes; the config says so, so every view reads the real ones.
        for name, value in (("d_model", spec.d_model), ("d_k", spec.d_model // spec.heads),
                            ("d_v", spec.d_model // spec.heads), ("heads", spec.heads), ("projections", True)):
            object.__setattr__(self, name, value)
        if len(self.tokens) > spec.max_tokens:
            raise ValueError(f"{spec.label} reads at most {spec.max_tokens} tokens; "
                             f"this text has {len(self.tokens):,}")

    def token_set(self):
        """The Tokens of the sentence: the model's WordPiece tokens in model mode, else ours."""
        if self.model is not None:
            from .pretrained import model_tokenize

            return model_tokenize(self.model, self.sentence)
        return tokenize(self.sentence, self.tokenizer)

    @property
    def tokens(self) -> tuple[str, ...]:
        """The tokens of the sentence (cached by the tokenizer)."""
        return self.token_set().tokens

    @property
    def seq_len(self) -> int:
        """T, the number of tokens."""
        return len(self.tokens)

    @property
    def head_dims(self) -> tuple[int, int]:
        """(d_k, d_v) as used: without projections both equal d_model."""
        if not self.projections:
            return self.d_model, self.d_model
        return self.d_k, self.d_v

    def replace(self, **changes: Any) -> "AttentionConfig":
        """A copy with ``changes`` applied (validated like any new config)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> "AttentionConfig":
        """Build a config from a dict such as ``to_dict`` gives; unknown keys are an error."""
        if not isinstance(data, dict):
            raise ValueError("a config must be a mapping of field names to values")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(_short(k) for k in data if k not in known)
        if unknown:
            raise ValueError(f"unknown config field(s): {', '.join(unknown[:5])}")
        values = dict(data)
        t = values.get("temperature")
        if isinstance(t, int) and not isinstance(t, bool):
            if abs(t) > 1e300:
                raise ValueError(f"temperature must be a positive number; got {_short(t)}")
            values["temperature"] = float(t)
        return cls(**values)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


PRESETS: dict[str, AttentionConfig] = {
    # The explorer's start: the "follow x_2 'in'" walk, d = 5, d_q = d_k = d_v = 3.
    "default": AttentionConfig(),
    # Seed 004: torch.manual_seed(42); inputs = torch.rand(4, 3); W = torch.rand(3, 2), q = x W.
    "tutorial-uniform": AttentionConfig(
        sentence="I am learning this", inputs="uniform", seed=42, layout="row",
        d_model=3, d_k=2, d_v=2, heads=1,
    ),
    # Raschka's walk: nn.Embedding(6, 16) after manual_seed(123), reseed, W = torch.rand(24, 16), q = W x.
    "tutorial-embedding": AttentionConfig(
        sentence="Life is short, eat dessert first", seed=123, weight_seed=123, layout="column",
        d_model=16, d_k=24, d_v=28, heads=1,
    ),
}


def preset(name: str) -> AttentionConfig:
    """The named preset config; ``ValueError`` naming the choices otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None
