"""``attn-gui bench``: speed, latency and memory, printed as tables (``attn_gui.bench``)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from .common import Command, one_line


def add_arguments(b: argparse.ArgumentParser) -> None:
    b.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    b.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps")
    b.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    b.add_argument("--engine-only", action="store_true", help="skip the parts that need Qt")
    b.add_argument("--only", metavar="SECTION[,SECTION...]",
                   help="run only these sections: engine, display, memory, model, folder, decoder, quantized, "
                        "long, interventions, circuits, training, lens, window, startup, heavy")
    b.add_argument("--heavy", action="store_true",
                   help="also measure Llama-3-8B-shaped files (minutes; 26 GB of disk; kept in $ATTN_GUI_HEAVY_DIR)")
    b.add_argument("--compare", metavar="REV",
                   help="time the window part against REV (a commit of this checkout, or a folder holding "
                        "attn_gui) in the same run, in turns; each row gets the ratio of its median to REV's")


def run_bench(args: argparse.Namespace) -> int:
    """``attn-gui bench``: progress to stderr, the tables to stdout, the JSON to ``--json``; 0 on success."""
    from .. import bench
    from ..bench.compare import CompareError, check_rev

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


COMMAND = Command("bench", "measure speed, latency and memory; print a table", add_arguments, run_bench)
