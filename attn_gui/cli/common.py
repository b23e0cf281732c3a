"""What every command shares: the parser that fails in one line, the engine's flags and the config they
describe, the ``Command`` row each command module exports."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """One subcommand of ``attn-gui``: ``cli.COMMANDS`` makes its parser from this row and runs it.

    ``add_arguments`` adds the command's own flags; ``engine_options`` then adds one flag per config
    option (``add_engine_options``); ``run`` does the work and returns the exit status.
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    engine_options: bool = False


def no_arguments(parser: argparse.ArgumentParser) -> None:
    """A command without flags of its own."""


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):  # subparsers too: "--head" is never read as "--heads"
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # one clear line, exit 2 (argparse would print the whole usage)
        raise UsageError(f"{self.prog}: {one_line(message)} (see --help)")


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut to ``limit`` characters: newlines shown as \\n, and every other character that
    is not printable (a terminal's escape \\x1b, a lone surrogate) as its Python escape, so a file's name
    never moves the cursor, recolours or clears the terminal the line is printed to."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                       for c in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class UsageError(Exception):
    """A bad command line; printed as one line, exit status 2."""


def _flag_help(opt) -> str:
    text = opt.help.rstrip(".")
    if opt.kind == "bool" and opt.default is True:  # --no-X turns X off: its help says so
        text = f"do not {text[0].lower()}{text[1:]} (done by default)"
    if opt.ordinal:  # an index: the flag counts from 1, the config's field from 0
        text += f"; counted from 1: {opt.lo + 1} to {opt.hi + 1}" if opt.name != "layer" else \
            "; counted from 1: 1 to the model's layer count"
    elif opt.kind in ("int", "float") and opt.lo is not None:
        text += f"; {_number(opt.lo)} to {_number(opt.hi)}"
    if opt.kind not in ("bool", "heads") and opt.default is not None:
        default = opt.default + 1 if opt.ordinal else opt.default
        text += f" (default {default})" if opt.kind != "text" else f' (default "{default}")'
    if opt.modes == {"random"}:
        text += "; random weights only"
    return text


def _number(value: int | float) -> str:
    """A whole number in full (``9223372036854775807``, ``1000000000``), else as ``%g``: never ``9.22337e+18``."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def add_engine_options(p: argparse.ArgumentParser) -> None:
    """One flag per declared config option (``OPTIONS``), named after its field."""
    from ..engine import OPTIONS, PRESETS

    g = p.add_argument_group("engine options (default: the chosen preset, else the tutorial default)")
    g.add_argument("--preset", choices=list(PRESETS), help="start from a named config")
    for opt in OPTIONS.values():
        kw: dict = {"dest": opt.name, "default": None, "help": _flag_help(opt)}
        if opt.kind == "bool":
            kw["action"] = "store_false" if opt.default else "store_true"
        elif opt.kind == "model":  # a bundled name or a model folder: the config checks which
            kw["metavar"] = "{" + ",".join(v for v in opt.values if v is not None) + "}|PATH"
        elif opt.kind == "choice":
            kw["choices"] = [v for v in opt.values if v is not None]
            if opt.bare is not None:  # an old boolean flag: given alone it means this choice
                kw.update(nargs="?", const=opt.bare)
        elif opt.kind in ("int", "float"):
            kw.update(type=int if opt.kind == "int" else float, metavar="N" if opt.kind == "int" else "X")
        elif opt.kind == "heads":
            kw["metavar"] = "L.H,..."
        else:
            kw["metavar"] = "TEXT" if opt.kind == "text" else "DEVICE"
        g.add_argument(opt.flag, **kw)


def given_options(args: argparse.Namespace) -> dict:
    """The config fields set on the command line (not their defaults)."""
    from ..engine import OPTIONS

    return {name: getattr(args, name) for name in OPTIONS if getattr(args, name, None) is not None}


def sentence_note(args: argparse.Namespace, sentence: str) -> str | None:
    """The line that names the sentence a command ran on when the command line gave none (the toy default, or a
    checkpoint's probe): a continuation or a logit of a sentence nobody typed read as the person's own. None
    when ``--sentence`` was given."""
    if getattr(args, "sentence", None) is not None:
        return None
    return f"sentence: {sentence!r} (no --sentence given)"


def config_from_args(args: argparse.Namespace, load: bool = True):
    """The AttentionConfig the options describe; UsageError or UserError with a readable message.

    An option that has no effect with the chosen source (``--d-model`` with ``--model``) is
    refused rather than ignored. ``load=False`` (the window): a model that must be loaded or
    converted first is left to the window, which opens at once and shows the progress.
    """
    from ..engine import OPTIONS, AttentionConfig, check_tokens, check_tokens_now, parse_heads, preset

    base = preset(args.preset) if getattr(args, "preset", None) else AttentionConfig()
    changes = given_options(args)
    if "layer" in changes:
        changes["layer"] = _layer_from_one(changes["layer"], changes.get("model", base.model))
    if "ablate" in changes:  # "5.3,12.1", counted from 1
        changes["ablate"] = parse_heads(changes["ablate"])
    if changes.get("model") and "sentence" not in changes:  # a checkpoint of attn-gui train: its task's probe
        from ..engine.train.checkpoint import probe_sentence

        changes["sentence"] = probe_sentence(changes["model"]) or base.sentence
    if changes.get("positional") == "rope" and "d_k" not in changes and base.model is None \
            and "model" not in changes and base.dims.d_k % 2:
        # RoPE turns pairs of dimensions: the default d_k of 3 becomes 4 (the documented
        # ``--focus rope_angles --positional rope`` exited 2); a d_k given on the command line is refused instead
        changes["d_k"] = base.dims.d_k + 1
    config = base.replace(**changes)
    inert = [OPTIONS[name].flag for name in changes if config.mode not in OPTIONS[name].modes]
    if inert:
        reason = (f"has no effect with --model {config.model}: the model fixes its sizes and weights"
                  if config.model else "needs --model")
        raise UsageError(f"attn-gui: {', '.join(inert)} {reason}")
    if not load:
        check_tokens_now(config)
        return config
    if config.model is not None:
        load_model(config.model)
    check_tokens(config)  # no tokens, or more than the model reads: refused before anything is written
    return config


def _layer_from_one(layer: int, model: str | None) -> int:
    """The config's 0-based layer of ``--layer`` (counted from 1); UsageError out of range."""
    from ..engine import AttentionConfig
    from ..engine.model.plan import plan

    if model is None:
        raise UsageError("attn-gui: --layer needs --model")
    spec = plan(AttentionConfig(model=model)).facts
    if not 1 <= layer <= spec.layers:
        raise UsageError(f"attn-gui: {spec.label} has layers 1 to {spec.layers}; got --layer {layer}")
    return layer - 1


def head_from_args(args: argparse.Namespace, config) -> int | None:
    """The 0-based head of ``--head`` (counted from 1) for ``config``, or None; UsageError out of range."""
    head = getattr(args, "head", None)
    if head is None:
        return None
    heads = config.dims.heads
    if not 1 <= head <= heads:
        raise UsageError(f"attn-gui: this config has heads 1 to {heads}; got --head {head}")
    return head - 1


def load_model(name: str) -> None:
    """Load model ``name``; a first load that builds its tokenizer into the cache reports every 10 % on stderr."""
    from ..engine import AttentionConfig
    from ..engine.model.plan import plan

    model = plan(AttentionConfig(model=name))  # the name resolved once: its label and its source
    shown = [-10]

    def progress(done: int, total: int) -> None:
        percent = 100 * done // max(total, 1)
        if percent >= shown[0] + 10 or done == total:
            shown[0] = percent
            print(f"attn-gui: first load of {model.facts.label}: building its tokenizer into the cache, "
                  f"{percent}%", file=sys.stderr, flush=True)

    model.source.load(progress)
