"""``attn-gui export``: every map as PNG/SVG and every tensor as .npy/.csv, or one HTML page, no window."""

from __future__ import annotations

import argparse
import os
import sys

from .common import Command, config_from_args, head_from_args, one_line
from .terminal import Stop, interrupts, tty_progress


def add_arguments(ex: argparse.ArgumentParser) -> None:
    ex.add_argument("--out", required=True, metavar="DIR",
                    help="folder to write (created if missing); with --format html, the page's file (.html)")
    ex.add_argument("--format", default="png,svg,npy,csv", metavar="LIST",
                    help="comma-separated subset of png,svg,npy,csv (default: all four); or html alone: one "
                         "self-contained page of the maps, their hover values and the token walk")
    ex.add_argument("--width", type=int, default=None, metavar="PX", help="pixel width of each PNG")
    ex.add_argument("--overwrite", action="store_true",
                    help="write into a folder that holds other files (they are kept; same-named files replaced)")
    ex.add_argument("--yes", action="store_true",
                    help="write an export estimated larger than 1 GiB or longer than a minute to write "
                         "(refused without it, before any file)")
    ex.add_argument("--head", type=int, metavar="N", help="the head figure.png shows, counted from 1 (default 1)")


def run_export(args: argparse.Namespace) -> int:
    """``attn-gui export``: compute the options' config and write it into ``args.out``, whole.

    Everything that can be checked (options, formats, width, the folder) is checked
    before the compute, and the rest before the first byte is written. Images need Qt
    (offscreen); an arrays-only export never imports it. Ctrl-C or SIGTERM stop it
    between files: ``Cancelled`` (the folder is unchanged).
    """
    from ..export.folder import Cancelled

    with interrupts() as stop:
        try:
            return _export(args, stop)
        except KeyboardInterrupt:
            raise Cancelled(args.out) from None


def _export(args: argparse.Namespace, stop: Stop) -> int:
    from ..engine import compute
    from ..export.bundle import CONFIRM_BYTES, CONFIRM_SECONDS, check_before_compute, export_all
    from ..export.files import IMAGE_FORMATS, check_width, parse_formats
    from ..export.folder import Target
    from ..present.frame import make_frame

    config = config_from_args(args)
    head = head_from_args(args, config) or 0
    if "html" in [f.strip().lower().lstrip(".") for f in args.format.split(",")]:
        return _export_page(args, config, head, stop)
    formats = parse_formats(args.format)
    width = None if args.width is None else check_width(args.width)
    Target(args.out, overwrite=args.overwrite)  # refused before the compute; creates nothing
    if not args.yes:  # the T x T arrays alone over the limits: refused before any is computed
        check_before_compute(config, formats)
    if any(f in IMAGE_FORMATS for f in formats):
        _offscreen("PNG and SVG need")
    result = compute(config)
    stop.writing = True
    progress = tty_progress if sys.stderr.isatty() else None
    written = export_all(make_frame(0, result), args.out, formats, width=width, cancel=stop.is_set,
                         overwrite=args.overwrite, head=head, progress=progress,
                         confirm_over=None if args.yes else CONFIRM_BYTES,
                         confirm_seconds=None if args.yes else CONFIRM_SECONDS)
    heads = f"{result.heads} head" + ("s" if result.heads != 1 else "")
    shown = args.out if args.out.endswith(os.sep) else args.out + os.sep
    keys = f", T_k = {result.key_len}" if result.source_tokens is not None else ""  # cross-attention
    print(f"wrote {len(written)} files to {one_line(shown)} (T = {result.seq_len}{keys}, {heads})")
    return 0


def _offscreen(what: str) -> None:
    """Qt's offscreen application, for pictures; ``UserError`` in one line where PySide6 or pyqtgraph is missing."""
    from ..engine import UserError

    try:
        from ..render.offscreen import ensure_app
    except ImportError as exc:
        raise UserError(f"{what} PySide6 and pyqtgraph ({exc.name} is missing); install them, "
                        f"or export only --format npy,csv") from None
    ensure_app(offscreen=True)


def _export_page(args: argparse.Namespace, config, head: int, stop: Stop) -> int:
    """``attn-gui export --format html``: one self-contained page of the result in the file ``--out``."""
    from pathlib import Path

    from ..engine import compute
    from ..export.bundle import CONFIRM_BYTES, CONFIRM_SECONDS
    from ..export.files import ExportError
    from ..present.frame import make_frame

    if args.format.strip().lower().lstrip(".") != "html":
        raise ExportError("html writes one page and cannot be mixed with other formats; export it alone "
                          "(--format html)")
    if args.width is not None or args.overwrite:
        raise ExportError(f"--{'width' if args.width is not None else 'overwrite'} does not apply to a page "
                          f"(--format html)")
    if Path(args.out).suffix.lower() not in (".html", ".htm") or Path(args.out).is_dir():
        raise ExportError(f"with --format html, --out names the page's file, ending in .html; got {one_line(args.out)}")
    _offscreen("a page's maps need")
    from ..export.page import export_page

    result = compute(config)
    stop.writing = True
    path = export_page(make_frame(0, result), args.out, head, confirm_over=None if args.yes else CONFIRM_BYTES,
                       confirm_seconds=None if args.yes else CONFIRM_SECONDS, cancel=stop.is_set)
    print(f"wrote {one_line(str(path))} ({path.stat().st_size:,} bytes, T = {result.seq_len}, "
          f"{result.heads} head{'s' if result.heads != 1 else ''})")
    return 0


COMMAND = Command("export", "write every map as PNG/SVG and every tensor as .npy/.csv, or one HTML page to share, "
                            "no window", add_arguments, run_export, engine_options=True)
