"""``attn-gui gui`` (the default command: the window), ``attn-gui lessons`` and ``attn-gui lesson``."""

from __future__ import annotations

import argparse

from .common import Command, UsageError, config_from_args, given_options, head_from_args, no_arguments
from .terminal import check_display


def _geometry(text: str) -> tuple[int, int]:
    """``--geometry WxH``: (width, height) in pixels, each 200 to 10000."""
    w, _, h = text.lower().partition("x")
    if not (w.isdigit() and h.isdigit() and 200 <= int(w) <= 10000 and 200 <= int(h) <= 10000):
        raise argparse.ArgumentTypeError(f"expected WxH, each 200 to 10000 pixels (e.g. 1366x768); got {text!r}")
    return int(w), int(h)


def _scale(text: str) -> tuple[str, str]:
    """``--colour-scale MAP=MODE``: a map's colour scale, e.g. weights=row."""
    from ..engine import FIELDS
    from ..present.scales import scale_choices

    field, _, mode = text.partition("=")
    if field not in FIELDS:
        raise argparse.ArgumentTypeError(f"expected MAP=MODE with MAP one of {', '.join(FIELDS)}; got {text!r}")
    if mode not in scale_choices(FIELDS[field].kind):
        raise argparse.ArgumentTypeError(f"the map {field} takes the colour scales "
                                         f"{', '.join(scale_choices(FIELDS[field].kind))}; got {text!r}")
    return field, mode


def add_gui_arguments(gui: argparse.ArgumentParser) -> None:
    gui.add_argument("--head", type=int, metavar="N", help="the head to show first, counted from 1 (default 1)")
    from ..engine import FIELDS
    from ..present.docks import DOCK_ROWS

    view = gui.add_argument_group("what the window shows first (for slides and tests)")
    view.add_argument("--focus", choices=list(FIELDS), metavar="MAP",
                      help="the map shown large, e.g. weights (alpha, the default), scores, rope_angles")
    view.add_argument("--all-maps", action="store_true", help="every map in data-flow order instead of one large")
    view.add_argument("--dock", choices=[r.name for r in DOCK_ROWS], metavar="NAME",
                      help="the dock in front: " + ", ".join(r.name for r in DOCK_ROWS))
    view.add_argument("--geometry", type=_geometry, metavar="WxH", help="the window's size in pixels, e.g. 1366x768")
    view.add_argument("--colour-scale", type=_scale, action="append", metavar="MAP=MODE",
                      help="a map's colour scale: auto, fixed (0 to 1), max (0 to the map's max) or row (each row "
                           "to its own max), e.g. weights=row; signed maps take auto or row (repeat for more maps)")


def run_window(args: argparse.Namespace) -> int:
    """``attn-gui gui``: the window, with the config and view the options ask for."""
    # no options: the window opens where the user left it (saved settings)
    given = given_options(args) or args.preset or args.head is not None
    config = config_from_args(args, load=False) if given else None
    head = head_from_args(args, config) if given else None
    check_display()
    from ..ui.app import run_gui

    view = {"focus": args.focus, "all_maps": args.all_maps, "dock": args.dock,
            "geometry": args.geometry, "scales": dict(args.colour_scale or ())}
    if view.get("focus") and view.get("all_maps"):
        raise UsageError("attn-gui: --focus and --all-maps ask for different views; give one")
    return run_gui(config, head=head, **view)  # its own handlers close the window on Ctrl-C and SIGTERM


WINDOW_FLAGS = ("--model", "--layer", "--sentence", "--preset", "--heads", "--head", "--focus", "--all-maps",
                "--dock", "--geometry")  # the window's options shown by ``attn-gui --help`` (all: gui --help)


def window_epilog(gui: argparse.ArgumentParser) -> str:
    """The window's most used options, their help as ``attn-gui gui --help`` gives it: ``attn-gui --help`` listed
    the commands only, and a newcomer did not find --model, --layer, --focus or --dock."""
    import textwrap

    lines = ["the window (the default command: attn-gui [options] is attn-gui gui [options]):"]
    actions = {flag: a for a in gui._actions for flag in a.option_strings}
    for flag in WINDOW_FLAGS:
        action = actions[flag]
        metavar = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
        head = f"  {flag}{metavar}"
        text = (action.help or "").replace("%(default)s", str(action.default))
        lines += textwrap.wrap(text, width=78, initial_indent=f"{head:<24}" if len(head) < 24 else head + "  ",
                               subsequent_indent=" " * 24)
    lines.append("every option of the window: attn-gui gui --help")
    return "\n".join(lines)


def run_lessons(args: argparse.Namespace) -> int:
    """``attn-gui lessons``: one line a lesson (its name, steps and title)."""
    from ..present.lessons import lesson_names, load_lesson

    for name in lesson_names():
        lesson = load_lesson(name)
        print(f"{name:20} {len(lesson.steps)} steps  {lesson.title}")
    return 0


def add_lesson_arguments(les: argparse.ArgumentParser) -> None:
    les.add_argument("name", help="a lesson's name, as `attn-gui lessons` lists it")
    les.add_argument("--step", type=int, default=1, metavar="N", help="the step to open, counted from 1 (default 1)")


def run_lesson(args: argparse.Namespace) -> int:
    """``attn-gui lesson NAME``: the window at a lesson's step."""
    from ..present.lessons import load_lesson

    load_lesson(args.name).step(args.step)  # an unknown lesson or step: one line, exit 2, no window
    check_display()
    from ..ui.app import run_gui

    return run_gui(None, lesson=(args.name, args.step))


COMMAND = Command("gui", "open the window (the default)", add_gui_arguments, run_window, engine_options=True)
LESSONS = Command("lessons", "list the guided lessons", no_arguments, run_lessons)
LESSON = Command("lesson", "open the window at a lesson's step (for slides)", add_lesson_arguments, run_lesson)
