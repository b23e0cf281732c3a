"""Guided lessons: steps read from ``resources/lessons/*.json``, filled from the learner's own result.

A lesson file is plain JSON (stdlib on every supported Python) so a teacher can write one::

    {"title": "...", "seed": "004", "summary": "...",
     "config": {"preset": "tutorial-uniform", "set": {"scale": false}},
     "steps": [{"focus": "weights", "marks": [[3, null]], "text": "Row {i} is {alpha_row[3]}",
                "question": {"ask": "...", "kind": "argmax", "field": "weights", "row": 3},
                "action": {"ask": "Raise d_k to 64", "when": {"d_k": {"min": 64}}}}]}

Positions (rows, columns, tokens, heads) count from 1 in the files, as the window shows them.
Placeholders ``{name[i,j]:fmt}`` are read by a small parser over the result, never ``eval``.
"""

from __future__ import annotations

import json
import math
import re
from importlib import resources
from dataclasses import dataclass, field
from typing import Any

import torch

from ..engine import AttentionConfig, UserError, preset
from ..engine.run.fields import FIELDS
from ..engine.train.checkpoint import trained_with
from .resources import read_text


class LessonError(UserError):
    """An unknown lesson or step, or a lesson file that does not say what it must."""


@dataclass(frozen=True)
class Question:
    """A question whose answer is computed from the result: the learner clicks a cell of ``field``."""

    ask: str
    kind: str  # "argmax" / "argmin": the column of the highest / lowest value in ``row``
    field: str
    row: int  # 1-based query row
    head: int = 1


@dataclass(frozen=True)
class Action:
    """Something the learner is asked to do; ``when`` maps config fields to the state that shows it."""

    ask: str
    when: dict[str, Any]


@dataclass(frozen=True)
class Step:
    focus: str
    text: str
    marks: tuple[tuple[int, int | None], ...] = ()  # 1-based (row, col); col None: the whole row
    question: Question | None = None
    action: Action | None = None


@dataclass(frozen=True)
class Lesson:
    name: str
    title: str
    seed: str
    summary: str
    preset: str
    overrides: dict[str, Any] = field(default_factory=dict)
    steps: tuple[Step, ...] = ()

    def config(self) -> AttentionConfig:
        """The config the lesson starts from: its preset with its overrides."""
        base = preset(self.preset)
        return base.replace(**self.overrides) if self.overrides else base

    def config_at(self, number: int, start: AttentionConfig | None = None) -> AttentionConfig:
        """The config at step ``number`` when the learner did every action of steps 1 to ``number``,
        from ``start`` (default the lesson's own); actions that choose a model are left out (random weights)."""
        config = self.config() if start is None else start
        for step in self.steps[:number]:
            if step.action and "model" not in step.action.when:
                for name, want in step.action.when.items():
                    config = config.replace(**{name: want.get("min", want.get("max")) if isinstance(want, dict)
                                               else want})
        return config

    def step(self, number: int) -> Step:
        """Step ``number``, counted from 1; ``LessonError`` when there is no such step."""
        if not 1 <= number <= len(self.steps):
            raise LessonError(f"lesson {self.name} has steps 1 to {len(self.steps)}, not {number}")
        return self.steps[number - 1]


def _lesson_files() -> list[str]:
    folder = resources.files("attn_gui.resources").joinpath("lessons")
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".json"))


def lesson_names() -> list[str]:
    """The shipped lessons' names in order (the file names without ``.json``)."""
    return [name[:-5] for name in _lesson_files()]


def load_lesson(name: str) -> Lesson:
    """Read lesson ``name``; ``LessonError`` naming the choices when there is none."""
    names = lesson_names()
    if name not in names:
        raise LessonError(f"unknown lesson {name!r}; choose one of {', '.join(names)}")
    return parse_lesson(name, read_text(f"lessons/{name}.json"))


def parse_lesson(name: str, text: str) -> Lesson:
    """Parse the JSON of one lesson, checking every step's map and question."""
    data = json.loads(text)
    config = data.get("config", {})
    steps = tuple(_parse_step(name, i + 1, s) for i, s in enumerate(data["steps"]))
    return Lesson(name=name, title=data["title"], seed=data.get("seed", ""), summary=data.get("summary", ""),
                  preset=config.get("preset", "default"), overrides=dict(config.get("set", {})), steps=steps)


def _parse_step(name: str, number: int, data: dict) -> Step:
    focus = data["focus"]
    if focus not in FIELDS:
        raise LessonError(f"lesson {name} step {number}: unknown map {focus!r}")
    marks = tuple((int(r), None if c is None else int(c)) for r, c in data.get("marks", ()))
    q = data.get("question")
    question = None
    if q is not None:
        if q.get("kind", "argmax") not in ("argmax", "argmin"):
            raise LessonError(f"lesson {name} step {number}: unknown question kind {q['kind']!r}")
        question = Question(ask=q["ask"], kind=q.get("kind", "argmax"), field=q.get("field", focus),
                            row=int(q["row"]), head=int(q.get("head", 1)))
    a = data.get("action")
    action = Action(ask=a["ask"], when=dict(a["when"])) if a is not None else None
    return Step(focus=focus, text=data["text"], marks=marks, question=question, action=action)


# --- placeholders --------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{([A-Za-z_]+)(?:\[([0-9, ]+)\])?(?::([^{}]*))?\}")


def _head_zero(result, name: str, head: int = 0) -> torch.Tensor:
    """A field as a tensor, with head ``head`` picked for per-head fields (K/V via ``head_index``)."""
    tensor = getattr(result.full() if result.streamed else result, name)
    if tensor is None:
        raise LessonError(f"this result has no {FIELDS[name].symbol} map")
    if FIELDS[name].per_head:
        tensor = tensor[result.head_index(name, head)]
    return tensor.detach().float().cpu()


def _derived(result, name: str) -> Any:
    """Values that are not a field of the result, but that the lessons talk about."""
    options = result.resolved.shown  # the shown layer as it ran: a model's own divisor, not a config field
    scalars = {
        "T": result.seq_len, "d_k": result.q.shape[-1], "d_v": result.v.shape[-1], "d_model": result.x.shape[-1],
        "h": result.heads, "g": result.k.shape[0], "sqrt_d_k": options.replace(scale=True).root(result.q.shape[-1]),
        "temperature": options.temperature,
    }
    if name in scalars:
        return scalars[name]
    if name == "token":
        return list(result.tokens)
    if name == "alpha_row":
        return _head_zero(result, "weights")
    if name == "argmax_token":  # per query row: the key token with the highest weight
        weights = _head_zero(result, "weights")
        return [result.key_tokens[int(j)] for j in weights.argmax(dim=-1)]
    if name == "max_alpha":
        return _head_zero(result, "weights").max(dim=-1).values
    if name == "score_std":  # spread of the raw scores of head 1, the quantity seed 004 watches grow with d_k
        return _head_zero(result, "scores").std().item()
    if name == "scaled_std":
        scaled = _head_zero(result, "scaled")
        return scaled[torch.isfinite(scaled)].std().item()
    if name == "masked":  # keys hidden from each query row (the mask's -inf)
        return (~torch.isfinite(_head_zero(result, "scaled"))).sum(dim=-1)
    raise LessonError(f"unknown placeholder {{{name}}}")


def _value(result, name: str, index: str | None) -> Any:
    value = _head_zero(result, name) if name in FIELDS else _derived(result, name)
    if index:
        for i in (int(part) for part in index.split(",")):
            if not 1 <= i <= len(value):
                raise LessonError(f"{{{name}[{index}]}}: position {i} is past the end ({len(value)})")
            value = value[i - 1]
    return value


def _format(value: Any, spec: str | None) -> str:
    if isinstance(value, torch.Tensor):
        value = value.item() if value.dim() == 0 else value.tolist()
    if isinstance(value, list):
        return "[" + ", ".join(_format(v, spec) for v in value) + "]"
    if isinstance(value, float):
        return format(value, spec or ".4f")
    return format(value, spec) if spec else str(value)


def fill(text: str, result) -> str:
    """``text`` with every placeholder replaced by its value in ``result``.

    ``{name}``, ``{name[i]}``, ``{name[i,j]}``, ``{name[i,j]:.2f}``: a field of the result (head 1
    for per-head fields) or a derived value (``T``, ``d_k``, ``alpha_row``, ``argmax_token``, ...),
    positions from 1. Unknown names and positions past the end raise ``LessonError``.
    """
    def replace(match: re.Match) -> str:
        name, index, spec = match.groups()
        return _format(_value(result, name, index), spec)

    return _PLACEHOLDER.sub(replace, text)


# --- questions and actions -----------------------------------------------------------------------

def answer(question: Question, result) -> int:
    """The right column (1-based) of the question on ``result``."""
    row = _value(result, question.field, None) if question.head == 1 else _head_zero(
        result, question.field, question.head - 1)
    values = row[question.row - 1]
    finite = torch.where(torch.isfinite(values), values, torch.tensor(float("nan")))
    pick = torch.nan_to_num(finite, nan=-math.inf if question.kind == "argmax" else math.inf)
    return int((pick.argmax() if question.kind == "argmax" else pick.argmin()).item()) + 1


def judge(question: Question, result, column: int) -> tuple[bool, str]:
    """Whether the clicked ``column`` (1-based) answers ``question``, and a sentence with the numbers."""
    right = answer(question, result)
    values = _head_zero(result, question.field, question.head - 1)[question.row - 1]
    keys = result.key_tokens
    said = f"{keys[column - 1]!r} has {values[column - 1].item():.4f}"
    if column == right:
        return True, f"Right: {said}, the {'highest' if question.kind == 'argmax' else 'lowest'} in row {question.row}."
    return False, (f"Not quite: {said}, but {keys[right - 1]!r} has {values[right - 1].item():.4f}"
                   f" (column {right}).")


def action_done(action: Action, config: AttentionConfig) -> bool:
    """True when ``config`` shows the asked change: each ``when`` entry is a value, or {"min"/"max": n}, or for
    the model {"trained": {"task": "induction", "heads": 1, ...}}: a checkpoint of ``attn-gui train`` (or the Train
    dock) trained with those settings (``engine.train.checkpoint.trained_with``)."""
    for name, want in action.when.items():
        have = getattr(config, name)
        if isinstance(want, dict) and "trained" in want:
            settings = trained_with(have) if isinstance(have, str) else None
            if settings is None or any(settings.get(k) != v for k, v in want["trained"].items()):
                return False
        elif isinstance(want, dict):
            if "min" in want and not (have is not None and have >= want["min"]):
                return False
            if "max" in want and not (have is not None and have <= want["max"]):
                return False
        elif have != want:
            return False
    return True


def placeholders(text: str) -> list[str]:
    """The placeholders of ``text`` as written (for checks and tests)."""
    return [m.group(0) for m in _PLACEHOLDER.finditer(text)]
