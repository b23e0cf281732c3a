"""Each config field declared once: kind, default, range, labels and where it has an effect.

The controls, the CLI flags, the session reader and the config's own validation all
read these declarations, so a new option is one declared field plus its math.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass
from typing import Any

from ..base.errors import ConfigError

RANDOM, MODEL = "random", "model"
BOTH = frozenset({RANDOM, MODEL})
# What a model's forward makes of an option (``Option.model``): "inert" (random weights only: kept, no effect),
# "input" (what the model reads: the sentence), "model" (it names the model or a part of it: the model, the
# layer, struck heads), "run" (how the compute runs
# or is shown, not what it computes: device, dtype, layout) or "what-if" (a model's forward has no such option:
# it runs changed in every layer as a labelled what-if, ``engine.plan``)
IN_MODEL = ("inert", "input", "model", "run", "what-if")
WHAT_IF_KIND = "what-if"
KINDS = ("text", "int", "float", "bool", "choice", "device", "model", "heads")

_DEVICE_RE = re.compile(r"cpu|mps|cuda(?::[0-9]+)?")  # [0-9], not \d: "cuda:٣" is no device


def _short(value: Any) -> str:
    """repr() cut to a readable length, so a hostile value cannot flood a message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _exists(path: str) -> bool:
    """Whether ``path`` names something on disk (a folder or file named without ``./`` is a path too)."""
    try:
        return os.path.lexists(path)
    except (ValueError, OSError):  # a NUL byte, an over-long name
        return False


def _finite(x: float) -> bool:
    try:
        return math.isfinite(x)
    except OverflowError:  # an int too large for a float
        return False


@dataclass(frozen=True)
class Option:
    """The declaration of one ``AttentionConfig`` field.

    Attributes
    ----------
    name : str
        The field name.
    kind : str
        "text", "int", "float", "bool", "choice", "device" or "model".
    default : Any
        The field's default.
    label : str
        Short name for the window.
    help : str
        One sentence for tooltips and ``--help``.
    lo, hi : int or float or None
        Inclusive bounds of the value ("int", "float") or of its length ("text").
    choices : tuple of (value, human label)
        The allowed values of a "choice" (and "model") field, in menu order.
    decimals : int or None
        "float": the most decimal places a value may have.
    nullable : bool
        None is allowed (weight_seed: from X's seed; model: random weights).
    modes : frozenset of {"random", "model"}
        Where the field has an effect; elsewhere it is kept but inert.
    bare : Any
        "choice": the value of the CLI flag given without one (an old boolean flag), or None.
    ordinal : bool
        "int": an index, counted from 0 in the config (as torch counts) and from 1 where a
        person reads or types it (the window's spin box, the CLI flag): ``layer`` 0 is layer 1.
    model : str
        What a model's forward makes of it (``IN_MODEL``): "inert" for the random-weights-only options, else
        "model", "run" or "what-if" as declared.
    neutral : Any
        The value at which the option changes nothing of a model's computation (a what-if's off): its default.
    """

    name: str
    kind: str
    default: Any
    label: str
    help: str
    lo: int | float | None = None
    hi: int | float | None = None
    choices: tuple[tuple[Any, str], ...] = ()
    decimals: int | None = None
    nullable: bool = False
    modes: frozenset[str] = BOTH
    bare: Any = None
    ordinal: bool = False
    model: str = "inert"
    neutral: Any = None

    @property
    def flag(self) -> str:
        """The CLI flag: ``--d-model``; ``--no-scale`` for a bool that defaults to True."""
        dashed = self.name.replace("_", "-")
        return f"--no-{dashed}" if self.kind == "bool" and self.default is True else f"--{dashed}"

    @property
    def values(self) -> tuple[Any, ...]:
        """The allowed values of a "choice" or "model" field."""
        return tuple(value for value, _ in self.choices)

    def check(self, value: Any) -> None:
        """Raise ``ConfigError`` naming this field unless ``value`` is allowed."""
        if value is None and self.nullable:
            return
        name = self.name
        if self.kind == "text":
            if not isinstance(value, str):
                raise ConfigError(f"{name} must be text; got {_short(value)}")
            if self.hi is not None and len(value) > self.hi:
                raise ConfigError(f"the {name} is {len(value):,} characters; the limit is {self.hi:,}")
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:  # lone surrogates: bytes that were not UTF-8 (argv, a file)
                raise ConfigError(f"the {name} is not valid text: character {exc.start + 1:,} is "
                                  f"U+{ord(value[exc.start]):04X}, a byte that is not UTF-8 or half a "
                                  f"surrogate pair") from None
        elif self.kind == "bool":
            if not isinstance(value, bool):
                raise ConfigError(f"{name} must be true or false; got {_short(value)}")
        elif self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{name} must be a whole number; got {_short(value)}")
            self._check_range(value, str(value) if abs(value) < 10**30 else _short(value))
        elif self.kind == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
                raise ConfigError(f"{name} must be a number between {self.lo:g} and {self.hi:g}; "
                                  f"got {_short(value)}")
            self._check_range(value, f"{value:g}")
            if self.decimals is not None and not math.isclose(round(value, self.decimals), value,
                                                               rel_tol=1e-12, abs_tol=1e-15):
                raise ConfigError(f"{name} has at most {self.decimals} decimals; got {_short(value)}")
        elif self.kind in ("choice", "model"):
            if self.kind == "model" and _registered(value):
                return  # a model object in memory (``attn_gui.register``)
            if self.kind == "model" and isinstance(value, str) and value not in self.values:
                if "/" in value or "\\" in value or value.lower().endswith(".gguf") or _exists(value):
                    return  # a folder or a GGUF: its config.json or header is read (and checked) when needed
                bundled = ", ".join(str(v) for v in self.values if v is not None)
                raise ConfigError(f"model {_short(value)} is neither a bundled model ({bundled}) nor an existing "
                                  f"folder or .gguf file{' (or none)' if self.nullable else ''}")
            if not any(value == v and type(value) is type(v) for v in self.values if v is not None):
                allowed = ", ".join(str(v) for v in self.values if v is not None)
                none = (", a model folder, a .gguf file" if self.kind == "model" else "") + \
                    (" or none" if self.nullable else "")
                raise ConfigError(f"{name} must be one of {allowed}{none}; got {_short(value)}")
        elif self.kind == "heads":
            _check_heads(name, value)
        elif self.kind == "device":
            if not isinstance(value, str) or not _DEVICE_RE.fullmatch(value):
                raise ConfigError(f"{name} must be cpu, cuda, cuda:N or mps; got {_short(value)}")
        else:  # a declaration error, not a user's: fail loudly
            raise TypeError(f"unknown option kind {self.kind!r}")

    def _check_range(self, value: int | float, shown: str) -> None:
        lo, hi = self.lo, self.hi
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ConfigError(f"{self.name} must be between {lo:g} and {hi:g}; got {shown}"
                              if isinstance(lo, float) or isinstance(hi, float)
                              else f"{self.name} must be between {lo} and {hi}; got {shown}")


def _check_heads(name: str, value: Any) -> None:
    """Refuse anything but a tuple of distinct (layer, head) pairs of whole numbers >= 0."""
    if not isinstance(value, tuple):
        raise ConfigError(f"{name} must be (layer, head) pairs such as 5.3,12.1; got {_short(value)}")
    for pair in value:
        if (not isinstance(pair, tuple) or len(pair) != 2
                or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in pair)):
            raise ConfigError(f"{name} must be (layer, head) pairs of whole numbers; got {_short(pair)}")
    if len(set(value)) != len(value):
        twice = next(p for p in value if value.count(p) > 1)
        raise ConfigError(f"{name}: head {twice[0] + 1}.{twice[1] + 1} is listed twice")


def parse_heads(text: str) -> tuple[tuple[int, int], ...]:
    """``"5.3, 12.1"`` (layer.head, counted from 1) as 0-based pairs ``((4, 2), (11, 0))``; "" is none.

    Raises ``ConfigError`` with one line naming the part that is not layer.head.
    """
    pairs = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        layer, dot, head = part.partition(".")
        if not (dot and layer.isascii() and layer.isdigit() and head.isascii() and head.isdigit()
                and int(layer) >= 1 and int(head) >= 1):
            raise ConfigError(f"heads are written layer.head counted from 1, such as 5.3,12.1; got {_short(part)}")
        pairs.append((int(layer) - 1, int(head) - 1))
    return tuple(pairs)


def format_heads(heads: tuple[tuple[int, int], ...]) -> str:
    """0-based (layer, head) pairs as people write them: ``((4, 2), (11, 0))`` -> ``"5.3, 12.1"``."""
    return ", ".join(f"{layer + 1}.{head + 1}" for layer, head in heads)


def toggle_head(heads: tuple[tuple[int, int], ...], head: tuple[int, int]) -> tuple[tuple[int, int], ...]:
    """``heads`` with ``head`` (layer, head) removed if struck, else added at the end."""
    return tuple(h for h in heads if h != head) if head in heads else (*heads, head)


def option(default: Any, *, kind: str, label: str, help: str, lo: int | float | None = None,
           hi: int | float | None = None, choices: tuple[tuple[Any, str], ...] = (),
           decimals: int | None = None, nullable: bool = False, modes: frozenset[str] = BOTH,
           bare: Any = None, ordinal: bool = False, model: str | None = None) -> Any:
    """A dataclass field carrying its ``Option`` declaration in its metadata.

    The name is filled in from the field by ``declared_options``. ``model`` (``IN_MODEL``) must be declared for
    an option that acts in model mode (``modes`` holding MODEL); a random-weights-only option is "inert" there.
    """
    if kind not in KINDS:
        raise TypeError(f"unknown option kind {kind!r}")
    if (MODEL in modes) != (model is not None) or (model is not None and model not in IN_MODEL[1:]):
        raise TypeError(f"option model= must be one of {IN_MODEL[1:]} where it acts in model mode, else left out")
    spec = dict(kind=kind, label=label, help=help, lo=lo, hi=hi, choices=tuple(choices),
                decimals=decimals, nullable=nullable, modes=frozenset(modes), bare=bare, ordinal=ordinal,
                model=model or "inert", neutral=default)
    return dataclasses.field(default=default, metadata={"option": spec})


def declared_options(cls: type) -> dict[str, Option]:
    """Every field of dataclass ``cls`` declared with ``option()``, in field order."""
    return {
        f.name: Option(name=f.name, default=f.default, **f.metadata["option"])
        for f in dataclasses.fields(cls)
        if "option" in f.metadata
    }


def _registered(value) -> bool:
    """Whether ``value`` names a model object registered in memory (``engine.sources.memory``)."""
    from ..specs.catalog import REGISTERED

    return isinstance(value, str) and value in REGISTERED
