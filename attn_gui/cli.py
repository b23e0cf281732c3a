"""The ``attn-gui`` command: the window (default), ``export``, ``generate`` and ``bench``.

Bad options print one line and exit with status 2; no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from . import __version__

# Nothing heavy is imported here: main() installs its signal handling before torch and Qt
# load, so Ctrl-C or SIGTERM at any moment of the start-up ends in one line and exit 130.


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):  # subparsers too: "--head" is never read as "--heads"
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # one clear line, exit 2 (argparse would print the whole usage)
        raise UsageError(f"{self.prog}: {one_line(message)} (see --help)")


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (newlines shown as \\n), cut to ``limit`` characters."""
    text = text.replace("\r", "\\r").replace("\n", "\\n")
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
    from .engine import OPTIONS, PRESETS

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
    from .engine import OPTIONS

    return {name: getattr(args, name) for name in OPTIONS if getattr(args, name, None) is not None}


def config_from_args(args: argparse.Namespace, load: bool = True):
    """The AttentionConfig the options describe; UsageError or UserError with a readable message.

    An option that has no effect with the chosen source (``--d-model`` with ``--model``) is
    refused rather than ignored. ``load=False`` (the window): a model that must be loaded or
    converted first is left to the window, which opens at once and shows the progress.
    """
    from .engine import OPTIONS, AttentionConfig, check_tokens, check_tokens_now, parse_heads, preset

    base = preset(args.preset) if getattr(args, "preset", None) else AttentionConfig()
    changes = given_options(args)
    if "layer" in changes:
        changes["layer"] = _layer_from_one(changes["layer"], changes.get("model", base.model))
    if "ablate" in changes:  # "5.3,12.1", counted from 1
        changes["ablate"] = parse_heads(changes["ablate"])
    if changes.get("model") and "sentence" not in changes:  # a checkpoint of attn-gui train: its task's probe
        from .engine.training import probe_sentence

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
    from .engine import model_spec

    if model is None:
        raise UsageError("attn-gui: --layer needs --model")
    spec = model_spec(model)
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
    from .engine import model_spec, source

    shown = [-10]

    def progress(done: int, total: int) -> None:
        percent = 100 * done // max(total, 1)
        if percent >= shown[0] + 10 or done == total:
            shown[0] = percent
            print(f"attn-gui: first load of {model_spec(name).label}: building its tokenizer into the cache, "
                  f"{percent}%", file=sys.stderr, flush=True)

    source(name).load(progress)


def _geometry(text: str) -> tuple[int, int]:
    """``--geometry WxH``: (width, height) in pixels, each 200 to 10000."""
    w, _, h = text.lower().partition("x")
    if not (w.isdigit() and h.isdigit() and 200 <= int(w) <= 10000 and 200 <= int(h) <= 10000):
        raise argparse.ArgumentTypeError(f"expected WxH, each 200 to 10000 pixels (e.g. 1366x768); got {text!r}")
    return int(w), int(h)


def _scale(text: str) -> tuple[str, str]:
    """``--colour-scale MAP=MODE``: a map's colour scale, e.g. weights=row."""
    from .engine import FIELDS
    from .present.scales import scale_choices

    field, _, mode = text.partition("=")
    if field not in FIELDS:
        raise argparse.ArgumentTypeError(f"expected MAP=MODE with MAP one of {', '.join(FIELDS)}; got {text!r}")
    if mode not in scale_choices(FIELDS[field].kind):
        raise argparse.ArgumentTypeError(f"the map {field} takes the colour scales "
                                         f"{', '.join(scale_choices(FIELDS[field].kind))}; got {text!r}")
    return field, mode


def build_parser() -> argparse.ArgumentParser:
    # allow_abbrev off: "--head" must never be read as "--heads" (nor any prefix as a flag)
    p = _Parser(prog="attn-gui", description="Attention Explorer: watch self-attention computed, step by step.")
    p.add_argument("--version", action="version", version=f"attn-gui {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser,
                           metavar="{gui,export,generate,effects,attribute,train,circuit,corpus,lessons,lesson,models,bench}")

    gui = sub.add_parser("gui", help="open the window (the default)")
    gui.add_argument("--head", type=int, metavar="N", help="the head to show first, counted from 1 (default 1)")
    from .engine import FIELDS
    from .present.state import DOCKS

    view = gui.add_argument_group("what the window shows first (for slides and tests)")
    view.add_argument("--focus", choices=list(FIELDS), metavar="MAP",
                      help="the map shown large, e.g. weights (alpha, the default), scores, rope_angles")
    view.add_argument("--all-maps", action="store_true", help="every map in data-flow order instead of one large")
    view.add_argument("--dock", choices=list(DOCKS), metavar="NAME", help="the dock in front: " + ", ".join(DOCKS))
    view.add_argument("--geometry", type=_geometry, metavar="WxH", help="the window's size in pixels, e.g. 1366x768")
    view.add_argument("--colour-scale", type=_scale, action="append", metavar="MAP=MODE",
                      help="a map's colour scale: auto, fixed (0 to 1), max (0 to the map's max) or row (each row "
                           "to its own max), e.g. weights=row; signed maps take auto or row (repeat for more maps)")
    add_engine_options(gui)

    ex = sub.add_parser("export", help="write every map as PNG/SVG and every tensor as .npy/.csv, or one HTML page "
                                       "to share, no window")
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
    add_engine_options(ex)

    g = sub.add_parser("generate", help="continue the sentence with a decoder model, the most likely token "
                                        "each step; print each step's probability, then the text")
    g.add_argument("--steps", type=int, default=8, metavar="N", help="tokens to generate, 1 to 512 (default 8)")
    add_engine_options(g)

    e = sub.add_parser("effects", allow_abbrev=False,
                       help="ablate (or, with --corrupt, patch) each head of a decoder alone; write the layer x "
                            "head grid of its effect on the next token as CSV and PNG")
    e.add_argument("--out", required=True, metavar="DIR", help="folder to write (created if missing)")
    e.add_argument("--corrupt", metavar="TEXT", help="patch each head from --sentence into this sentence (same "
                                                      "token count) and write the recovered fraction instead")
    e.add_argument("--target", metavar="TOKEN", help="the next token whose log p is measured (default: the top one)")
    e.add_argument("--mode", choices=("zero", "mean"), default="zero", help="ablation: zero, or mean over positions")
    add_engine_options(e)
    add_attribute_parser(sub)
    add_train_parser(sub)
    add_circuit_parser(sub)
    sub.add_parser("lessons", help="list the guided lessons", allow_abbrev=False)
    les = sub.add_parser("lesson", help="open the window at a lesson's step (for slides)", allow_abbrev=False)
    les.add_argument("name", help="a lesson's name, as `attn-gui lessons` lists it")
    les.add_argument("--step", type=int, default=1, metavar="N", help="the step to open, counted from 1 (default 1)")

    add_corpus_parser(sub)
    add_models_parser(sub)

    b = sub.add_parser("bench", help="measure speed, latency and memory; print a table")
    b.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    b.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps")
    b.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    b.add_argument("--engine-only", action="store_true", help="skip the parts that need Qt")
    b.add_argument("--only", metavar="SECTION[,SECTION...]",
                   help="run only these sections: engine, display, memory, model, folder, decoder, quantized, "
                        "long, interventions, circuits, training, window, startup, heavy")
    b.add_argument("--heavy", action="store_true",
                   help="also measure Llama-3-8B-shaped files (minutes; 26 GB of disk; kept in $ATTN_GUI_HEAVY_DIR)")
    b.add_argument("--compare", metavar="REV",
                   help="time the window part against REV (a commit of this checkout, or a folder holding "
                        "attn_gui) in the same run, in turns; each row gets the ratio of its median to REV's")
    p.epilog = _window_epilog(gui)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    return p


WINDOW_FLAGS = ("--model", "--layer", "--sentence", "--preset", "--heads", "--head", "--focus", "--all-maps",
                "--dock", "--geometry")  # the window's options shown by ``attn-gui --help`` (all: gui --help)


def _window_epilog(gui: argparse.ArgumentParser) -> str:
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


@contextlib.contextmanager
def _interrupts():
    """Ctrl-C and SIGTERM as a request to stop: yields an Event the export asks between files.

    Until the export starts writing (``stop.writing = True``) a signal is handled as before
    it (the compute holds no files): the program (``launch``) ends at once with one line and
    exit 130, never raising inside Qt's or torch's C code; ``main`` called in-process raises
    KeyboardInterrupt. Once writing, a signal only sets the event, so no exception ever
    unwinds through Qt's drawing code; the program keeps this handler to its end, so a
    signal after the files are written changes nothing (exit 0, the summary its one line).
    """
    stop = threading.Event()
    stop.writing = False

    def handler(signum, frame):
        if stop.writing:
            stop.set()
            return
        previous = old[signum]
        if previous == signal.SIG_IGN:
            return
        if callable(previous):
            previous(signum, frame)  # launch's: one line and exit 130; or Python's: KeyboardInterrupt
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        if not _LAUNCHED:
            for sig, previous in old.items():
                signal.signal(sig, previous)


def run_export(args: argparse.Namespace) -> int:
    """``attn-gui export``: compute the options' config and write it into ``args.out``, whole.

    Everything that can be checked (options, formats, width, the folder) is checked
    before the compute, and the rest before the first byte is written. Images need Qt
    (offscreen); an arrays-only export never imports it. Ctrl-C or SIGTERM stop it
    between files: ``Cancelled`` (the folder is unchanged).
    """
    from .export.folder import Cancelled

    with _interrupts() as stop:
        try:
            return _export(args, stop)
        except KeyboardInterrupt:
            raise Cancelled(args.out) from None


def _export(args: argparse.Namespace, stop: threading.Event) -> int:
    from .engine import compute
    from .export.bundle import CONFIRM_BYTES, CONFIRM_SECONDS, check_before_compute, export_all
    from .export.files import IMAGE_FORMATS, check_width, parse_formats
    from .export.folder import Target
    from .present.frame import make_frame

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
    progress = _tty_progress if sys.stderr.isatty() else None
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
    from .engine import UserError

    try:
        from .render.offscreen import ensure_app
    except ImportError as exc:
        raise UserError(f"{what} PySide6 and pyqtgraph ({exc.name} is missing); install them, "
                        f"or export only --format npy,csv") from None
    ensure_app(offscreen=True)


def _export_page(args: argparse.Namespace, config, head: int, stop: threading.Event) -> int:
    """``attn-gui export --format html``: one self-contained page of the result in the file ``--out``."""
    from pathlib import Path

    from .engine import compute
    from .export.bundle import CONFIRM_BYTES, CONFIRM_SECONDS
    from .export.files import ExportError
    from .present.frame import make_frame

    if args.format.strip().lower().lstrip(".") != "html":
        raise ExportError("html writes one page and cannot be mixed with other formats; export it alone "
                          "(--format html)")
    if args.width is not None or args.overwrite:
        raise ExportError(f"--{'width' if args.width is not None else 'overwrite'} does not apply to a page "
                          f"(--format html)")
    if Path(args.out).suffix.lower() not in (".html", ".htm") or Path(args.out).is_dir():
        raise ExportError(f"with --format html, --out names the page's file, ending in .html; got {one_line(args.out)}")
    _offscreen("a page's maps need")
    from .export.page import export_page

    result = compute(config)
    stop.writing = True
    path = export_page(make_frame(0, result), args.out, head, confirm_over=None if args.yes else CONFIRM_BYTES,
                       confirm_seconds=None if args.yes else CONFIRM_SECONDS, cancel=stop.is_set)
    print(f"wrote {one_line(str(path))} ({path.stat().st_size:,} bytes, T = {result.seq_len}, "
          f"{result.heads} head{'s' if result.heads != 1 else ''})")
    return 0


def _tty_progress(done: int, total: int) -> None:
    """One self-overwriting line on a terminal's stderr (only there: logs stay clean)."""
    sys.stderr.write(f"\rattn-gui: writing file {done} of {total} ({100 * done // total}%)")
    if done == total:
        sys.stderr.write("\r\033[K")  # the bar goes; the summary line follows on stdout
    sys.stderr.flush()


GENERATE_OPTIONS = ("sentence", "model", "device", "dtype", "ablate")  # what changes a generation's numbers


def run_generate(args: argparse.Namespace) -> int:
    """``attn-gui generate``: one line per step (position, token, probability), then the text."""
    from .engine.decoding import check_steps, generate

    from .engine import OPTIONS

    # generation runs the whole model as it is: an option of the shown attention step changes nothing
    inert = [OPTIONS[name].flag for name in given_options(args) if name not in GENERATE_OPTIONS]
    if inert:
        raise UsageError(f"attn-gui: {', '.join(inert)} {'has' if len(inert) == 1 else 'have'} no effect on "
                         f"generate: it runs the whole model as trained (only --sentence, --model, --ablate, --device "
                         f"and --dtype apply)")
    config = config_from_args(args)
    check_steps(config, args.steps)
    result = generate(config, args.steps)
    for step in result.steps:  # positions counted from 1, as the window's x₁ … x_T
        print(f"step {step.position - len(result.prompt.tokens) + 1:>3}  position {step.position + 1:>3}  "
              f"{step.token:<16} p = {step.probability:.4f}  ({step.elapsed_ms:.0f} ms)")
    if result.stopped:
        print("(stopped at the end-of-sequence token)")
    print(config.sentence + result.text)
    return 0


def run_effects(args: argparse.Namespace) -> int:
    """``attn-gui effects``: the (layers x heads) grid as effects.csv and effects.png in ``--out``."""
    from .engine import interventions, source

    from .export.folder import Target

    config = config_from_args(args)
    Target(args.out, overwrite=True)  # a file in its place, a name too long: refused before the measuring
    if config.model:
        load_model(config.model)
    if args.corrupt is None:
        grids = interventions.head_effects(config, args.target, args.mode)
    else:
        grids = interventions.patch_effects(config, config.replace(sentence=args.corrupt))
    grid = None
    for grid in grids:
        print(f"attn-gui effects: layer {grid.done} of {grid.total}", file=sys.stderr, flush=True)
    if args.corrupt is None:  # name the token measured: --target's, else the top next one
        token = f'"{source(config.model).token_text(grid.target)}"'
        token = token if args.target is not None else f"top next token {token}"
        symbol, what = "Δ log p", f"change in log p({token}) when the head alone is ablated ({args.mode})"
    else:
        symbol, what = "recovered", "fraction of the logit difference recovered by patching the head alone"
    values = grid.values.numpy()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [f"layer {i + 1}" for i in range(values.shape[0])]
    cols = [f"head {j + 1}" for j in range(values.shape[1])]
    with open(out / "effects.csv", "w", encoding="utf-8") as f:
        f.write(f"# {what}\n" + ",".join(["layer", *cols]) + "\n")
        for i, row in enumerate(values):
            f.write(",".join([str(i + 1), *(f"{v:.6g}" for v in row)]) + "\n")
    from .export.images import export_image
    from .present.maps import MapData
    from .render.offscreen import dispose, render_map

    view = render_map(MapData(values, f"{symbol}: {what}", "signed", rows, cols, symbol=symbol))
    try:
        export_image(view, out / "effects.png")
    finally:
        dispose(view)
    print(f"wrote {out / 'effects.csv'} and {out / 'effects.png'}")
    return 0


def add_attribute_parser(sub) -> None:
    a = sub.add_parser("attribute", allow_abbrev=False,
                       help="split a decoder's logit of the next token into each head's, MLP's and embedding's "
                            "direct term (direct logit attribution); write them as CSV and the head grid as PNG")
    a.add_argument("--token", required=True, metavar="TOKEN", help="the next token whose logit is split, "
                                                                   "e.g. ' Paris' with its leading space")
    a.add_argument("--against", metavar="TOKEN", help="split logit(--token) - logit(this token) instead")
    a.add_argument("--out", required=True, metavar="DIR", help="folder to write (created if missing)")
    a.add_argument("--overwrite", action="store_true", help="write among other files in the folder")
    add_engine_options(a)


def run_attribute(args: argparse.Namespace) -> int:
    """``attn-gui attribute``: components.csv, heads.csv and dla.png in ``--out``, all or none."""
    from .engine import source
    from .engine.attribution import direct_logit_attribution
    from .export.folder import Target
    from .present.attribution import top_heads

    config = config_from_args(args)
    Target(args.out, overwrite=args.overwrite)  # refused before the compute; creates nothing
    if config.model:
        load_model(config.model)
    a = direct_logit_attribution(config, args.token, args.against)
    from .export.attribution import write_attribution
    from .render.offscreen import ensure_app

    ensure_app(offscreen=True)
    folder = write_attribution(a, source(config.model).token_text, args.out, args.overwrite)
    best = ", ".join(f"{name} ({value:+.3f})" for name, value in top_heads(a.heads.numpy(), 3))
    print(f"logit {a.logit:.4f}; largest heads {best}; wrote {one_line(str(folder))}")
    return 0


def add_circuit_parser(sub) -> None:
    """``attn-gui circuit``: which heads talk to which, by edge attribution (``engine.circuits``)."""
    from .engine.circuits import BUILT_IN, METHODS, METRICS

    c = sub.add_parser("circuit", allow_abbrev=False,
                       help="score every edge between a decoder's heads and MLPs on a task (EAP, EAP-IG or "
                            "information-flow routes); write the edges, the graph and the faithfulness curve")
    c.add_argument("--model", required=True, metavar="NAME|PATH",
                   help="a decoder: a bundled model, a folder, a .gguf file or an attn-gui train checkpoint")
    c.add_argument("--task", default="ioi", metavar="|".join(BUILT_IN) + "|PAIRS.jsonl",
                   help="a built-in task or a JSONL file of pairs (default ioi)")
    c.add_argument("--method", default="eap", choices=METHODS, help="default eap")
    c.add_argument("--out", required=True, metavar="DIR", help="folder to write (created if missing)")
    c.add_argument("--pairs", type=int, default=50, metavar="N", help="prompt pairs a built-in task makes, 1 to "
                                                                      "10000 (default 50)")
    c.add_argument("--steps", type=int, default=10, metavar="N", help="EAP-IG's points, 1 to 100 (default 10)")
    c.add_argument("--seed", type=int, default=0, help="seeds a built-in task's pairs (default 0)")
    c.add_argument("--metric", choices=METRICS, help="default: the task's own")
    c.add_argument("--format", default="csv", choices=("csv", "parquet"), help="the edges' file (default csv)")
    c.add_argument("--top", type=int, default=20, metavar="K", help="edges the graph draws (default 20)")
    c.add_argument("--no-faithfulness", action="store_true", help="skip the faithfulness curve (its forwards)")
    c.add_argument("--device", default="cpu", metavar="DEVICE", help="cpu, cuda, cuda:N or mps (default cpu)")
    c.add_argument("--dtype", default="float32", choices=("float32", "float64"), help="default float32")
    c.add_argument("--overwrite", action="store_true", help="write among other files in the folder")


def _stage_progress() -> Callable[[int, int, str], None]:
    """Progress on stderr: one self-overwriting line on a terminal, else a line every 10 % of each stage."""
    shown: dict[str, int] = {}
    tty = sys.stderr.isatty()

    def progress(done: int, total: int, what: str) -> None:
        percent = 100 * done // max(total, 1)
        if tty:
            sys.stderr.write(f"\rattn-gui circuit: {what} {done} of {total} ({percent}%)\033[K")
            if done == total:
                sys.stderr.write("\r\033[K")
        elif percent >= shown.get(what, -10) + 10 or done == total:
            shown[what] = percent
            sys.stderr.write(f"attn-gui circuit: {what} {done} of {total} ({percent}%)\n")
        sys.stderr.flush()
    return progress


def run_circuit(args: argparse.Namespace) -> int:
    """``attn-gui circuit``: everything checked before the compute, the files written all or nothing."""
    from .engine.circuits import BUILT_IN, circuit
    from .export.circuits import check_format, write_circuit
    from .export.folder import Target

    for name, value, low, high in (("--pairs", args.pairs, 1, 10000), ("--steps", args.steps, 1, 100),
                                   ("--top", args.top, 1, 10000)):
        if not low <= value <= high:
            raise UsageError(f"attn-gui circuit: {name} must be {low} to {high}, not {value}")
    check_format(args.format)
    Target(args.out, overwrite=args.overwrite)  # refused before the compute; creates nothing
    if args.task not in BUILT_IN and not args.task.endswith(".jsonl") and not Path(args.task).is_file():
        raise UsageError(f"attn-gui circuit: --task must be one of {', '.join(BUILT_IN)} or a .jsonl file of "
                         f"pairs, not {one_line(args.task, 60)!r}")  # before the model's load, not after
    load_model(args.model)
    found = circuit(args.model, args.task, args.method, pairs=args.pairs, steps=args.steps, seed=args.seed,
                    metric=args.metric, faithful=not args.no_faithfulness, device=args.device, dtype=args.dtype,
                    progress=_stage_progress())
    folder = write_circuit(found, args.out, args.format, args.top, args.overwrite)
    best = ", ".join(f"{w} -> {r} ({v:+.3g})" for w, r, v in found.top(3))
    f = found.faithfulness
    small = "" if f is None else (f"; {f.smallest} edges recover {f.target:.0%}" if f.smallest is not None
                                  else f"; no circuit recovers {f.target:.0%}")
    print(f"{found.method} on {found.task}, {found.pairs} pairs: metric {found.clean:.4g} clean, {found.corrupt:.4g} "
          f"corrupted; largest {best}{small}; wrote {one_line(str(folder))}")
    return 0


def add_train_parser(sub) -> None:
    """``attn-gui train``: its flags, one per field of ``TrainConfig`` that a person sets."""
    from .engine.tasks import TASKS

    t = sub.add_parser("train", allow_abbrev=False,
                       help="train a tiny decoder on a toy task; write a Hugging Face checkpoint and log.csv")
    t.add_argument("--task", default="induction", choices=TASKS, help="the task (default induction)")
    t.add_argument("--layers", type=int, default=2, metavar="N", help="1 to 4 (default 2)")
    t.add_argument("--heads", type=int, default=4, metavar="N", help="1 to 8 (default 4)")
    t.add_argument("--d-model", type=int, default=64, metavar="N", help="16 to 256 (default 64)")
    t.add_argument("--mlp", action="store_true", help="add the MLP, SwiGLU or GPT-2's GELU (default: attention only)")
    t.add_argument("--positions", default="rope", choices=("rope", "learned"),
                   help="rope: a Llama checkpoint (default); learned: a GPT-2 checkpoint (learned position "
                        "embeddings, LayerNorm, biases, tied head)")
    t.add_argument("--symbols", type=int, default=16, metavar="N", help="the task's symbols (default 16)")
    t.add_argument("--length", type=int, default=32, metavar="N", help="sequence length (default 32)")
    t.add_argument("--batch", type=int, default=32, metavar="N", help="sequences per step (default 32)")
    t.add_argument("--lr", type=float, default=3e-3, help="AdamW's learning rate (default 0.003)")
    t.add_argument("--steps", type=int, default=2000, metavar="N", help="training steps (default 2000)")
    t.add_argument("--seed", type=int, default=0, help="seeds the weights and the batches (default 0)")
    t.add_argument("--threads", type=int, default=1, metavar="N",
                   help="CPU threads for the model's products (default 1: at these sizes more threads mostly wait "
                        "on each other, 20 times slower on a busy CPU)")
    t.add_argument("--out", required=True, metavar="DIR",
                   help="the checkpoint folder: new, empty, or one train wrote (replaced whole)")


def run_train(args: argparse.Namespace) -> int:
    """``attn-gui train``: a progress bar with the loss on stderr; Ctrl-C stops after the step
    in progress and saves that whole checkpoint (with log.csv) before exiting 130."""
    import torch

    from .engine.training import TrainConfig, check_checkpoint_folder

    if not 1 <= args.steps <= 10_000_000:
        raise UsageError(f"attn-gui train: --steps must be 1 to 10000000, not {args.steps}")
    if not 1 <= args.threads <= 1024:
        raise UsageError(f"attn-gui train: --threads must be 1 to 1024, not {args.threads}")
    config = TrainConfig(task=args.task, symbols=args.symbols, length=args.length, layers=args.layers,
                         heads=args.heads, d_model=args.d_model, mlp=args.mlp, batch=args.batch, lr=args.lr,
                         seed=args.seed, positions=args.positions)
    check_checkpoint_folder(args.out)  # before step 1: a folder the save would refuse costs no training
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return _train(args, config)
    finally:
        torch.set_num_threads(threads)


def _train(args: argparse.Namespace, config) -> int:
    from .engine import UserError
    from .engine.training import Trainer
    from .present.formats import time_left

    trainer = Trainer(config)
    with _interrupts() as stop:
        stop.writing = True  # a signal asks to stop between steps: the weights stay whole
        for record in trainer.run(args.steps):
            if record.step % max(1, args.steps // 100) == 0 or record.step == args.steps or stop.is_set():
                done = record.step / args.steps
                bar = "#" * int(30 * done) + "." * (30 - int(30 * done))
                left = time_left(record.time, record.step, args.steps)
                print(f"\rtrain [{bar}] {record.step}/{args.steps}  loss {record.loss:.4f}  "
                      f"accuracy {record.accuracy:.3f}  {record.time:.1f} s, {left}  ", end="", file=sys.stderr,
                      flush=True)
            if stop.is_set():
                break
        print(file=sys.stderr)
        try:
            trainer.save(args.out, log=True)
        except OSError as exc:  # a full disk, the folder gone meanwhile: the previous checkpoint is kept
            raise UserError(f"cannot write the checkpoint to {args.out}: {exc.strerror or exc}; "
                            "a previous checkpoint there is kept") from None
    print(f"wrote {args.out} (step {trainer.steps}, loss {trainer.records[-1].loss:.4f}, "
          f"accuracy {trainer.records[-1].accuracy:.3f})")
    return 130 if stop.is_set() else 0


def add_corpus_parser(sub) -> None:
    """``attn-gui corpus``: per-head statistics of a model over a corpus, in-process or on Ray."""
    c = sub.add_parser("corpus", allow_abbrev=False,
                       help="per-head statistics (previous-token, duplicate, induction, sink, distance, entropy, "
                            "next-token DLA) over a corpus, with top examples; on Ray with --ray")
    c.add_argument("--model", required=True, metavar="NAME|PATH", help="a bundled model, a folder or a .gguf file")
    c.add_argument("--corpus", required=True, metavar="FILE",
                   help="a text file (one passage per line), .jsonl, .parquet or a datasets save_to_disk folder")
    c.add_argument("--out", required=True, metavar="DIR",
                   help="folder for heads.parquet, examples.parquet and manifest.json: new, empty, or a census of the "
                        "same inputs (a run stopped there resumes)")
    c.add_argument("--field", metavar="F", help="the text field of JSONL, Parquet or a datasets folder (default text)")
    c.add_argument("--ray", metavar="local|HOST:PORT", help="run on a local Ray, or join a running cluster")
    c.add_argument("--workers", type=int, metavar="N",
                   help="Ray actors (default: one per core of the local Ray or the cluster); without --ray, "
                        "torch's CPU threads")
    c.add_argument("--pattern", metavar='"from RE to RE > X"',
                   help="count per head the (query, key) token pairs matching the two regular expressions "
                        "weighted above X, e.g. \"from ^the$ to . > 0.5\"")
    c.add_argument("--compare", metavar="NAME|PATH",
                   help="a second model (same tokens, layers and heads): adds each head's mean Jensen-Shannon "
                        "divergence and ||dW_QK||, ||dW_OV|| where the shapes agree")
    c.add_argument("--top-k", type=int, default=5, metavar="K", help="examples kept per head and statistic, "
                                                                     "1 to 100 (default 5)")
    c.add_argument("--shard-size", type=int, default=32, metavar="N", help="passages per shard (default 32)")


def run_corpus(args: argparse.Namespace) -> int:
    """``attn-gui corpus``: a progress line on a terminal's stderr, the summary on stdout."""
    from .engine import corpus

    if args.workers is not None and not 1 <= args.workers <= 4096:
        raise UsageError(f"attn-gui corpus: --workers must be 1 to 4096, not {args.workers}")
    settings = corpus.Settings(model=args.model, top_k=args.top_k, shard_size=args.shard_size,
                               pattern=None if args.pattern is None else corpus.Pattern.parse(args.pattern),
                               compare=args.compare)
    passages = corpus.read_corpus(args.corpus, args.field)
    corpus.check_models(settings)
    if args.ray is not None:
        from .engine import corpus_ray

        runner = corpus_ray.runner(args.ray, args.workers)
        if args.ray != "local":  # refused at once, not after loading the model
            corpus_ray.check_address(args.ray)
    else:
        runner = functools.partial(corpus.run_in_process, threads=args.workers)
    for name in filter(None, (args.model, args.compare)):
        load_model(name)  # converted once here, not by every worker at once
    progress = _census_progress if sys.stderr.isatty() else None

    def notice(line: str) -> None:
        print(f"attn-gui corpus: {one_line(line)}", file=sys.stderr)

    with _raising_interrupts() if args.ray is not None else contextlib.nullcontext():
        result = corpus.census(passages, args.out, settings, runner=runner, progress=progress, notice=notice,
                               about={"ray": args.ray, "workers": args.workers})
    m = result.manifest
    rate = f", {m['passages_per_second']:.1f} passages/s" if m["passages_per_second"] else ""
    print(f"wrote heads.parquet, examples.parquet and manifest.json to {one_line(args.out)} ({m['passages']:,} "
          f"passages, {m['tokens']:,} tokens, {m['cut']:,} cut to {m['max_tokens']} tokens; {result.shards} shards, "
          f"{result.resumed} resumed{rate})")
    if m["dla_not_computed"]:
        print(f"no dla column: {m['dla_not_computed']}")
    return 0


@contextlib.contextmanager
def _raising_interrupts():
    """Ctrl-C and SIGTERM raise KeyboardInterrupt (in the main thread), so work that holds other processes
    (a local Ray and its workers) stops them before the program's one line and exit 130; set back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, _stop_now) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


def _census_progress(p) -> None:
    """One self-overwriting line on a terminal's stderr: passages done, their rate and the time left."""
    left = "" if p.left is None else f", {int(p.left) // 60} min {int(p.left) % 60:02d} s left"
    sys.stderr.write(f"\rattn-gui corpus: {p.done:,} of {p.total:,} passages, {p.rate:.1f} passages/s{left}\033[K")
    if p.done == p.total:
        sys.stderr.write("\r\033[K")
    sys.stderr.flush()


def _run_bench(args: argparse.Namespace) -> int:
    """``attn-gui bench``: progress to stderr, the tables to stdout, the JSON to ``--json``; 0 on success."""
    from . import bench
    from .bench.compare import CompareError, check_rev

    if args.json:
        try:
            bench.check_writable(args.json)  # before minutes of measuring, not after
        except OSError as exc:
            print(f"attn-gui bench: {one_line(str(exc))}", file=sys.stderr)
            return 2
    only = tuple(name.strip() for name in (args.only or "").split(",") if name.strip())
    unknown = [name for name in only if name not in bench.SECTION_NAMES]
    if unknown or (args.only is not None and not only):
        print(f"attn-gui bench: --only takes sections of {', '.join(bench.SECTION_NAMES)}; got "
              f"{', '.join(unknown) or repr(args.only)}", file=sys.stderr)
        return 2
    if args.compare is not None:
        if args.engine_only or only and "window" not in only:
            print("attn-gui bench: --compare times the window part; run it with the window section "
                  "(no --engine-only; --only window)", file=sys.stderr)
            return 2
        try:
            check_rev(args.compare)
        except CompareError as exc:
            print(f"attn-gui bench: {one_line(str(exc))}", file=sys.stderr)
            return 2
    tiny = os.environ.get(bench.TINY_ENV, "") not in ("", "0")
    settings = dataclasses.replace(
        bench.BenchSettings.for_mode(quick=args.quick, device=args.device, engine_only=args.engine_only, tiny=tiny),
        only=only, heavy=args.heavy, compare=args.compare or "")
    try:
        report = bench.run_bench(settings, log=lambda message: print(message, file=sys.stderr, flush=True))
    except CompareError as exc:  # the tree compared with failed to run the window
        print(f"attn-gui bench: {one_line(str(exc))}", file=sys.stderr)
        return 2
    print(bench.format_report(report))
    if args.json:
        bench.write_json(report, args.json)
        print(f"\nwrote {args.json}")
    return 0


def add_models_parser(sub) -> None:
    m = sub.add_parser("models", allow_abbrev=False,
                       help="list the models already on this computer (the Hugging Face cache, Ollama, LM Studio), "
                            "each with its size and family, and why one cannot be opened; nothing is downloaded")
    m.add_argument("--json", action="store_true", help="print the list as JSON instead of a table")


def run_models(args: argparse.Namespace) -> int:
    """``attn-gui models``: one row a model (where, name, size, family, the path that opens it or the reason
    it cannot be opened); with nothing found, the folders looked in. 0."""
    import dataclasses
    import json

    from .engine.readers.discover import discover
    from .export.files import human

    result = discover()
    if args.json:
        print(json.dumps({"looked": list(result.looked), "models": [
            {**dataclasses.asdict(f), "supported": f.supported} for f in result.found]}, indent=1))
        return 0
    if not result.found:
        print("No models found; looked in " + ", ".join(result.looked))
        return 0
    name = max(len(f.name) for f in result.found)
    for f in result.found:
        size = "?" if f.size is None else human(f.size)
        last = f.opens if f.supported else f"cannot open: {one_line(f.reason)}"
        print(f"{f.where:12}  {f.name:{name}}  {size:>10}  {f.family or '?':12}  {last}")
    refused = sum(not f.supported for f in result.found)
    count = len(result.found)
    print(f"\n{count} model{'s' if count != 1 else ''}, {count - refused} can be opened (--model PATH)")
    return 0


NO_DISPLAY = ("so the window cannot open; run it in a desktop session or over ssh -X, or use attn-gui export / "
              "generate, which need none")


def _check_display() -> None:
    """Refuse, in one line, to open the window on Linux with no display, or an X display that does not
    answer (Qt would abort on xcb: exit 134 and a core dump)."""
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM") or os.environ.get("WAYLAND_DISPLAY"):
        return
    display = os.environ.get("DISPLAY")
    if not display:
        raise UsageError(f"attn-gui: there is no display (DISPLAY and WAYLAND_DISPLAY are unset), {NO_DISPLAY}")
    if not _x_answers(display):
        raise UsageError(f"attn-gui: there is no display: nothing answers at DISPLAY={one_line(display, 60)}, "
                         f"{NO_DISPLAY}")


def _x_answers(display: str) -> bool:
    """Whether an X server accepts a connection at ``display`` ("[host]:N[.S]"); True for a form not known here."""
    import socket

    host, _, rest = display.rpartition(":")
    number = rest.partition(".")[0]
    if not number.isdigit() or host.startswith("/"):
        return True  # another form (a launchd socket path …): Qt is left to try it
    try:
        if host in ("", "unix"):  # a local server: its socket file, else Linux's abstract socket of that name
            for address in (f"/tmp/.X11-unix/X{number}", f"\0/tmp/.X11-unix/X{number}"):
                with socket.socket(socket.AF_UNIX) as s:
                    s.settimeout(2)
                    try:
                        s.connect(address)
                        return True
                    except OSError:
                        continue
            return False
        with socket.create_connection((host, 6000 + int(number)), timeout=2):
            return True
    except (OSError, ValueError, OverflowError):
        return False


def _stop_now(signum, frame):
    raise KeyboardInterrupt


_LAUNCHED = False  # run as the program (launch.main): its signal handlers never raise


def main(argv: list[str] | None = None, launched: bool = False) -> int:
    """Run the command ``argv`` (default ``sys.argv[1:]``); the exit status.

    ``launched``: called by ``launch.main``, whose handlers end the program at once with one
    line and exit 130 whenever Ctrl-C or SIGTERM comes, before the imports that take seconds
    and during them; they stay, as a handler that raised inside Qt's or torch's C code (an
    import, a paint) could abort or crash the program. Work that must stop cleanly (an export
    writing its files, a training) asks for a stop between its steps (``_interrupts``); once
    the command is done, a signal is ignored, so the interpreter's exit is never interrupted.
    Called in-process (tests), SIGTERM is handled like Ctrl-C: KeyboardInterrupt, one line, 130.
    """
    global _LAUNCHED
    main_thread = threading.current_thread() is threading.main_thread()
    _LAUNCHED = launched and main_thread
    previous = signal.signal(signal.SIGTERM, _stop_now) if main_thread and not _LAUNCHED else None
    try:
        status = _main(sys.argv[1:] if argv is None else argv)
        if _LAUNCHED:  # done: nothing is left to stop, and the exit must not be interrupted
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
    from .engine.base.errors import UserError
    from .export.folder import Cancelled

    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv = ["gui", *argv]
    try:
        args = build_parser().parse_args(argv)
        if args.command in (None, "gui"):
            # no options: the window opens where the user left it (saved settings)
            given = args.command == "gui" and (given_options(args) or args.preset or args.head is not None)
            config = config_from_args(args, load=False) if given else None
            head = head_from_args(args, config) if given else None
            _check_display()
            from .ui.app import run_gui

            view = {"focus": args.focus, "all_maps": args.all_maps, "dock": args.dock,
                    "geometry": args.geometry, "scales": dict(args.colour_scale or ())} if args.command == "gui" else {}
            if view.get("focus") and view.get("all_maps"):
                raise UsageError("attn-gui: --focus and --all-maps ask for different views; give one")
            return run_gui(config, head=head, **view)  # its own handlers close the window on Ctrl-C and SIGTERM
        if args.command == "lessons":
            from .present.lessons import lesson_names, load_lesson

            for name in lesson_names():
                lesson = load_lesson(name)
                print(f"{name:20} {len(lesson.steps)} steps  {lesson.title}")
            return 0
        if args.command == "lesson":
            from .present.lessons import load_lesson

            load_lesson(args.name).step(args.step)  # an unknown lesson or step: one line, exit 2, no window
            _check_display()
            from .ui.app import run_gui

            return run_gui(None, lesson=(args.name, args.step))
        if args.command == "export":
            return run_export(args)
        if args.command == "generate":
            return run_generate(args)
        if args.command == "effects":
            return run_effects(args)
        if args.command == "attribute":
            return run_attribute(args)
        if args.command == "train":
            return run_train(args)
        if args.command == "circuit":
            return run_circuit(args)
        if args.command == "corpus":
            return run_corpus(args)
        if args.command == "bench":
            return _run_bench(args)
        if args.command == "models":
            return run_models(args)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except UserError as exc:  # anything else is a bug: it raises with its traceback
        print(f"attn-gui: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except Cancelled as exc:
        print(f"attn-gui: {one_line(str(exc))}", file=sys.stderr)
        return 130
    return 0
