"""The view state: the one frozen truth of what the window shows.

The config decides the numbers; the view choices decide which of them are in front:
the selected head, the followed token, hidden special tokens and the map in focus.
Controls show a state and emit changes to it; sessions and settings save it whole.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..engine import FIELDS, AttentionConfig, AttentionResult, ConfigError, UserError
from ..engine.model.plan import plan
from .docks import DOCK_ROWS
from .scales import scale_choices

DEFAULT_TOKEN = 1  # the tutorials follow x_2 "in"
# the docks a person can open from the command line (``attn-gui --dock NAME``): the dock table's names
DOCKS = tuple(row.name for row in DOCK_ROWS)

# Qt lays out a paragraph as a whole: past these lengths every keystroke in the sentence
# box costs over 100 ms (measured with QPlainTextEdit: 50,000 word characters about 12 ms,
# one 50,000-character word 300 ms). Longer sentences still compute and export in the CLI.
MAX_WINDOW_CHARS = 50_000
MAX_WINDOW_RUN = 10_000  # characters without a space or line break


def check_window_text(text: str) -> None:
    """Refuse a sentence the window cannot show while staying responsive (UserError saying why).

    The limits are ``MAX_WINDOW_CHARS`` in all and ``MAX_WINDOW_RUN`` without a break;
    sessions and saved settings are checked with it, and the sentence box should be.
    """
    if len(text) > MAX_WINDOW_CHARS:
        raise UserError(f"the window shows sentences of at most {MAX_WINDOW_CHARS:,} characters; this one has "
                        f"{len(text):,} (attn-gui export takes longer ones)")
    run = max((len(word) for word in text.split()), default=0)
    if run > MAX_WINDOW_RUN:
        raise UserError(f"the window shows at most {MAX_WINDOW_RUN:,} characters without a space; this sentence "
                        f"has {run:,} in a row (attn-gui export takes it)")


def carry_layer(config: AttentionConfig, changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` with the layer carried across a change of model: the same layer where the
    new model has it, else its last; 0 for random weights, which have none.

    Choosing another source is one click; a layer the new source lacks would turn that click
    into an error whose cause the user cannot see (the layer box keeps the old number).
    The struck heads (``ablate``) name one model's heads: another model starts with none.
    """
    if "model" not in changes or changes["model"] == config.model:
        return changes
    try:
        spec = plan(config.replace(**{**changes, "layer": 0, "ablate": ()})).spec  # None: random weights
    except ConfigError:  # a model that is refused: the config built from changes says why
        spec = None
    layer = min(config.layer, spec.layers - 1) if spec is not None else 0
    return {"layer": layer, "ablate": (), **changes}


@dataclass(frozen=True)
class ViewState:
    """Config plus view choices.

    Attributes
    ----------
    config : AttentionConfig
    head : int
        Selected head, 0-based (the maps of per-head fields show it).
    token : int or None
        Followed query token, 0-based; None follows none.
    hide_special : bool
        Leave a model's [CLS] and [SEP] out of the maps (the numbers are unchanged).
    focus : str or None
        The result field shown large, or None for the whole pipeline.
    scales : tuple of (field, mode) pairs
        Colour scales chosen per map (``present.scales``), sorted by field; a field not
        named is drawn on its automatic scale. Per field, so every head's map agrees.
    """

    config: AttentionConfig = dataclasses.field(default_factory=AttentionConfig)
    head: int = 0
    token: int | None = DEFAULT_TOKEN
    hide_special: bool = False
    focus: str | None = None
    scales: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.config, AttentionConfig):
            raise UserError("a view state needs an AttentionConfig")
        for name in ("head", "token"):
            value = getattr(self, name)
            if value is None and name == "token":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
                raise UserError(f"{name} must be a whole number from 0; got {str(value)[:40]}")
        if not isinstance(self.hide_special, bool):
            raise UserError("hide_special must be true or false")
        if self.focus is not None and self.focus not in FIELDS:
            raise UserError(f"focus must be one of {', '.join(FIELDS)} or none; got {str(self.focus)[:40]}")
        self._check_scales()

    def _check_scales(self) -> None:
        if not isinstance(self.scales, tuple):
            raise UserError("scales must be pairs of a map and a colour scale")
        for pair in self.scales:
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
                raise UserError("scales must be pairs of a map and a colour scale")
            field, mode = pair
            if field not in FIELDS:
                raise UserError(f"scales: unknown map {field[:40]!r}; maps are {', '.join(FIELDS)}")
            if mode == "auto" or mode not in scale_choices(FIELDS[field].kind):
                choices = ", ".join(m for m in scale_choices(FIELDS[field].kind) if m != "auto")
                raise UserError(f"scales: the map {field} takes {choices}; got {mode[:40]!r}")
        fields = [field for field, _ in self.scales]
        if fields != sorted(set(fields)):
            raise UserError("scales: each map once, sorted by name")

    def scale_of(self, field: str) -> str:
        """The colour scale mode chosen for ``field``'s map ("auto" when none was)."""
        return dict(self.scales).get(field, "auto")

    def with_scale(self, field: str, mode: str) -> ViewState:
        """A copy drawing ``field``'s map on colour scale ``mode`` ("auto" forgets the choice)."""
        chosen = {**dict(self.scales), field: mode}
        return self.replace(scales=tuple(sorted((f, m) for f, m in chosen.items() if m != "auto")))

    def replace(self, **changes: Any) -> ViewState:
        """A copy with ``changes`` applied (validated like any new state)."""
        return dataclasses.replace(self, **changes)

    def with_config(self, **changes: Any) -> ViewState:
        """A copy whose config has ``changes`` applied (UserError if they make it invalid)."""
        return self.replace(config=self.config.replace(**changes))

    def fitted(self, result: AttentionResult) -> ViewState:
        """This state with the head and token kept inside ``result`` (a smaller result shows head 1)."""
        head = self.head if self.head < result.heads else 0
        token = self.token if self.token is None or self.token < result.seq_len else None
        return self if (head, token) == (self.head, self.token) else self.replace(head=head, token=token)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict: the config's fields under "config", then the view choices."""
        return {"config": self.config.to_dict(), "head": self.head, "token": self.token,
                "hide_special": self.hide_special, "focus": self.focus, "scales": dict(self.scales)}

    @classmethod
    def from_dict(cls, data: Any, check: bool = True) -> ViewState:
        """A state from ``to_dict``'s output; unknown keys and bad values raise UserError.

        A state read from a file is one the window will show, so its sentence must also
        pass ``check_window_text``; with ``check`` its head and token must fit its config
        (``check_against_config``).
        """
        if not isinstance(data, dict):
            raise UserError("a view state must be a mapping")
        unknown = sorted(str(k)[:40] for k in data if k not in {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise UserError(f"unknown view field(s): {', '.join(unknown[:5])}")
        values = dict(data)
        values["config"] = AttentionConfig.from_dict(values.get("config", {}))
        if "scales" in values:  # saved as {"weights": "row"}
            if not isinstance(values["scales"], dict):
                raise UserError("scales must map a map's name to a colour scale")
            values["scales"] = tuple(sorted(values["scales"].items()))
        check_window_text(values["config"].sentence)
        if values["config"].source_sentence is not None:
            check_window_text(values["config"].source_sentence)
        try:
            state = cls(**values)
        except TypeError as exc:  # a key given twice, or the like
            raise UserError(f"the view state is not valid: {exc}") from None
        if check:
            state.check_against_config()
        return state

    def disagreements(self) -> dict[str, str]:
        """{field: why} for the head or token outside what the config can show.

        The token is checked against a bound no tokenizer exceeds (UTF-8 bytes plus two
        special tokens): exact counting needs the model's tokenizer, and ``fitted`` keeps
        a token between the real count and that bound inside the result when shown.
        """
        off = {}
        heads = self.config.dims.heads
        if self.head >= heads:
            off["head"] = f"head {self.head + 1} is not in this config (heads 1 to {heads})"
        most = len(self.config.sentence.encode("utf-8")) + 2
        if self.token is not None and self.token >= most:
            off["token"] = f"token {self.token + 1} is past the sentence's end (it has at most {most} tokens)"
        return off

    def check_against_config(self) -> None:
        """UserError, in one line, when the head or token lies outside what the config can show."""
        if off := self.disagreements():
            raise UserError("; ".join(off.values()))

    def defaults_where_off(self) -> tuple[ViewState, list[str]]:
        """This state with each field that disagrees with the config reset to its default,
        and one note per reset field (a settings file's fallback, field by field)."""
        off = self.disagreements()
        defaults = {"head": 0, "token": DEFAULT_TOKEN}
        notes = [f"{why}; {name} reset to its default" for name, why in off.items()]
        return self.replace(**{name: defaults[name] for name in off}), notes
