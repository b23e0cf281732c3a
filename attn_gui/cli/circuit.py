"""``attn-gui circuit``: which heads talk to which, by edge attribution (``engine.analysis.circuits``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import Command, UsageError, load_model, one_line
from .terminal import Stop, interrupts, stage_progress


def add_arguments(c: argparse.ArgumentParser) -> None:
    from ..engine.analysis.circuits import BUILT_IN, GRADIENT_AT, METHODS, METRICS

    c.add_argument("--model", required=True, metavar="NAME|PATH",
                   help="a decoder: a bundled model, a folder, a .gguf file or an attn-gui train checkpoint")
    c.add_argument("--task", default="ioi", metavar="|".join(BUILT_IN) + "|PAIRS.jsonl",
                   help="a built-in task or a JSONL file of pairs (default ioi)")
    c.add_argument("--method", default="eap", choices=METHODS, help="default eap")
    c.add_argument("--out", required=True, metavar="DIR", help="folder to write (created if missing)")
    c.add_argument("--pairs", type=int, default=50, metavar="N", help="prompt pairs a built-in task makes, 1 to "
                                                                      "10000 (default 50)")
    c.add_argument("--gradient-at", default="clean", choices=GRADIENT_AT,
                   help="where EAP takes its gradient: clean (Syed et al., Hanna et al.; the default) or corrupted "
                        "(TransformerLens' attribution patching); EAP-IG averages it over the line between them")
    c.add_argument("--steps", type=int, default=10, metavar="N", help="EAP-IG's points, 1 to 100 (default 10)")
    c.add_argument("--seed", type=int, default=0, help="seeds a built-in task's pairs (default 0)")
    c.add_argument("--metric", choices=METRICS, help="default: the task's own")
    c.add_argument("--format", default="csv", choices=("csv", "parquet"), help="the edges' file (default csv)")
    c.add_argument("--top", type=int, default=20, metavar="K", help="edges the graph draws (default 20)")
    c.add_argument("--no-faithfulness", action="store_true", help="skip the faithfulness curve (its forwards)")
    c.add_argument("--device", default="cpu", metavar="DEVICE", help="cpu, cuda, cuda:N or mps (default cpu)")
    c.add_argument("--dtype", default="float32", choices=("float32", "float64"), help="default float32")
    c.add_argument("--overwrite", action="store_true", help="write among other files in the folder")


def say_estimate(seconds: float, points: int) -> None:
    """``present.circuits.curve_estimate`` on stderr, a line of its own (over a terminal's progress line)."""
    from ..present.circuits import curve_estimate

    start = "\r\033[K" if sys.stderr.isatty() else ""
    sys.stderr.write(f"{start}attn-gui circuit: {curve_estimate(seconds, points)}; --no-faithfulness skips it\n")
    sys.stderr.flush()


def run_circuit(args: argparse.Namespace) -> int:
    """``attn-gui circuit``: everything checked before the compute, the files written all or nothing; Ctrl-C or
    SIGTERM while they are written stops between two (``Cancelled``: the hidden folder removed, the target as
    it was), never ends the program with the hidden folder left."""
    from ..export.folder import Cancelled

    with interrupts() as stop:
        try:
            return _circuit(args, stop)
        except KeyboardInterrupt:
            if not stop.writing:
                raise  # during the compute: "interrupted", as before
            raise Cancelled(args.out) from None


def _circuit(args: argparse.Namespace, stop: Stop) -> int:
    from ..engine.analysis.circuits import BUILT_IN, circuit
    from ..export.circuits import check_format, write_circuit
    from ..export.folder import Target

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
                    progress=stage_progress(), estimate=say_estimate, gradient_at=args.gradient_at)
    stop.writing = True
    folder = write_circuit(found, args.out, args.format, args.top, args.overwrite, cancel=stop.is_set)
    best = ", ".join(f"{w} -> {r} ({v:+.3g})" for w, r, v in found.top(3))
    f = found.faithfulness
    small = "" if f is None else (f"; {f.smallest} edges recover {f.target:.0%}" if f.smallest is not None
                                  else f"; no circuit recovers {f.target:.0%}")
    at = f" (gradient at the {found.gradient_at} prompt)" if found.method == "eap" else ""
    print(f"{found.method}{at} on {found.task}, {found.pairs} pairs: metric {found.clean:.4g} clean, "
          f"{found.corrupt:.4g} corrupted; largest {best}{small}; wrote {one_line(str(folder))}")
    return 0


COMMAND = Command("circuit", "score every edge between a decoder's heads and MLPs on a task (EAP, EAP-IG or "
                             "information-flow routes); write the edges, the graph and the faithfulness curve",
                  add_arguments, run_circuit)
