"""The ``attn-gui`` command: the window (default) and one subcommand per module of this package.

Each command module exports a ``COMMAND`` row (``common.Command``); ``COMMANDS`` lists them, and the parser
and the dispatch are made from it. Bad options print one line and exit with status 2; no traceback reaches
the user.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from .. import __version__
from . import attribute, bench, circuit, corpus, effects, export, generate, gui, lens, models, terminal, train
from .common import Command, Parser, UsageError, add_engine_options, config_from_args, given_options, one_line

# Nothing heavy is imported here: main() installs its signal handling before torch and Qt
# load, so Ctrl-C or SIGTERM at any moment of the start-up ends in one line and exit 130.

__all__ = ["COMMANDS", "Command", "UsageError", "add_engine_options", "build_parser", "config_from_args",
           "given_options", "main"]

# The commands in the order ``attn-gui --help`` lists them.
COMMANDS: tuple[Command, ...] = (gui.COMMAND, export.COMMAND, generate.COMMAND, effects.COMMAND, attribute.COMMAND,
                                 train.COMMAND, circuit.COMMAND, gui.LESSONS, gui.LESSON, corpus.COMMAND,
                                 lens.COMMAND, models.COMMAND, bench.COMMAND)
DEFAULT = gui.COMMAND  # attn-gui [options] is attn-gui gui [options]


def build_parser() -> argparse.ArgumentParser:
    # allow_abbrev off: "--head" must never be read as "--heads" (nor any prefix as a flag)
    p = Parser(prog="attn-gui", description="Attention Explorer: watch self-attention computed, step by step.")
    p.add_argument("--version", action="version", version=f"attn-gui {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=Parser, metavar="{" + ",".join(c.name for c in COMMANDS) + "}")
    parsers = {}
    for command in COMMANDS:
        parsers[command.name] = parser = sub.add_parser(command.name, help=command.help)
        command.add_arguments(parser)
        if command.engine_options:
            add_engine_options(parser)
        parser.set_defaults(run=command.run)
    p.epilog = gui.window_epilog(parsers[DEFAULT.name])
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    return p


def main(argv: list[str] | None = None, launched: bool = False) -> int:
    """Run the command ``argv`` (default ``sys.argv[1:]``); the exit status.

    ``launched``: called by ``launch.main``, whose handlers end the program at once with one
    line and exit 130 whenever Ctrl-C or SIGTERM comes, before the imports that take seconds
    and during them; they stay, as a handler that raised inside Qt's or torch's C code (an
    import, a paint) could abort or crash the program. Work that must stop cleanly (an export
    writing its files, a training) asks for a stop between its steps (``terminal.interrupts``); once
    the command is done, a signal is ignored, so the interpreter's exit is never interrupted.
    Called in-process (tests), SIGTERM is handled like Ctrl-C: KeyboardInterrupt, one line, 130.
    """
    main_thread = threading.current_thread() is threading.main_thread()
    terminal.LAUNCHED = launched and main_thread
    previous = signal.signal(signal.SIGTERM, terminal.stop_now) if main_thread and not terminal.LAUNCHED else None
    try:
        status = _main(sys.argv[1:] if argv is None else argv)
        if terminal.LAUNCHED:  # done: nothing is left to stop, and the exit must not be interrupted
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return status
    except KeyboardInterrupt:
        print("attn-gui: interrupted", file=sys.stderr)
        if argv is None:  # the program itself: an interrupt inside an import's C code can leave
            sys.stderr.flush()  # Python to re-raise SIGINT at exit (status -2), so leave with 130 now
            os._exit(130)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str]) -> int:
    from ..engine.base.errors import UserError
    from ..export.folder import Cancelled

    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv = [DEFAULT.name, *argv]
    try:
        args = build_parser().parse_args(argv)
        return args.run(args)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except UserError as exc:  # anything else is a bug: it raises with its traceback
        print(f"attn-gui: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except Cancelled as exc:
        print(f"attn-gui: {one_line(str(exc))}", file=sys.stderr)
        return 130
