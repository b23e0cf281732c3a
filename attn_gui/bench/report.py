"""The report: metadata of a run, the plain-text tables, and the JSON file."""

from __future__ import annotations

import datetime
import json
import os
import platform
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import __version__
from ..engine.base.devices import resolve_device
from .settings import BenchSettings

SECTION_TITLES = {
    "engine": "Engine overhead: compute() against a plain torch reference (h=8, head size 64, d_model=512)",
    "display": "Display reduction of the weights (8 heads x T x T)",
    "memory": "Peak memory of fresh subprocesses",
    "model": "Model mode: all-MiniLM-L6-v2 (6 layers, 12 heads, d_model 384), run by the engine",
    "decoder": "Decoder mode: SmolLM2-135M (30 layers, 9 query / 3 K/V heads, d_model 576), float32 on the CPU",
    "model folder": "A Qwen2-0.5B-shaped bfloat16 folder against transformers (fresh subprocesses, in turns)",
    "long": "Long inputs for real models: one streamed run (fresh subprocess), time and peak RSS growth",
    "window": "The window (offscreen, 1600 x 1000): control change -> every visible map repainted",
    "startup": "Start-up of fresh subprocesses",
}


def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(resolve_device(device))
    if device == "mps":
        return "Apple MPS"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _package_version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def metadata_dict(settings: BenchSettings) -> dict[str, Any]:
    """Date, machine, device and library versions of a run."""
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "device": settings.device,
        "device_name": _device_name(settings.device),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "pyside6": _package_version("PySide6", "PySide6-Essentials"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "attn_gui": __version__,
        "load_average": [round(x, 2) for x in os.getloadavg()],  # 1, 5, 15 min at the start: a shared machine
    }


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "MiB":
        return f"{value:.0f} MiB"
    return f"{value:.3f} ms" if value < 10 else f"{value:.1f} ms"


def _shown(text: str) -> str:
    """``text`` on one line: a newline, a terminal's escape or any other unprintable character as its Python
    escape (a ``--compare`` folder's name is the user's, and a table's cell)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in text)


def _columns(table: Sequence[tuple[str, ...]]) -> list[str]:
    """``table`` (a header, then rows of cells) in aligned columns: the first two left, the rest right."""
    table = [tuple(_shown(c) for c in row) for row in table]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = []
    for i, row in enumerate(table):
        cells = [c.ljust(w) if j < 2 else c.rjust(w) for j, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  " + "  ".join(cells).rstrip())
        if i == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    return lines


def _table(rows: list[dict[str, Any]]) -> list[str]:
    header = ("name", "size", "median", "p95", "runs", "ratio / target", "met")
    table = [header]
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        if r["target"] is not None:
            ratio += f" / {r['target']:.2f}"
        met = "-" if r["met"] is None else ("yes" if r["met"] else "no")
        table.append((r["name"], r["size"], _fmt(r["median"], r["unit"]), _fmt(r["p95"], r["unit"]),
                      str(r["runs"]), ratio, met))
    lines = _columns(table)
    ratio_notes = sorted({_shown(f"{r['name']}: ratio to {r['ratio_to']}") for r in rows if r["ratio_to"]})
    return lines + [f"  ({note})" for note in ratio_notes]


def _compare_table(rows: list[dict[str, Any]]) -> list[str]:
    """Rows timed against another tree (``--compare``): both medians and p95s, the ratios, the target."""
    label = _shown(next((r["ratio_to"] for r in rows if r["ratio_to"]), "the tree compared with"))
    header = ("name", "size", "median", "p95", f"{label} median", f"{label} p95", "ratio", "p95 ratio",
              "CPU ratio", "target", "met")
    table = [header]
    for r in rows:
        e = r["extra"]
        table.append((r["name"], r["size"], _fmt(r["median"], r["unit"]), _fmt(r["p95"], r["unit"]),
                      _fmt(e.get("compared_median"), r["unit"]), _fmt(e.get("compared_p95"), r["unit"]),
                      "-" if r["ratio"] is None else f"{r['ratio']:.2f}",
                      "-" if e.get("p95_ratio") is None else f"{e['p95_ratio']:.2f}",
                      "-" if e.get("cpu_ratio") is None else f"{e['cpu_ratio']:.2f}",
                      _fmt(r["target"], r["unit"]), "-" if r["met"] is None else ("yes" if r["met"] else "no")))
    lines = _columns(table)
    loads = {who: [x for r in rows for pair in r["extra"].get(key, []) for x in pair]
             for who, key in (("this tree", "load"), (label, "compared_load"))}
    during = "; ".join(f"{who} {min(v):.1f}-{max(v):.1f}" for who, v in loads.items() if v)
    lines.append(f"  (ratio: this tree's median over {label}'s, both run in fresh processes in turns; CPU ratio: "
                 f"the same of the GUI thread's CPU time; load average during the runs: {during})")
    return lines


def format_report(report: dict[str, Any]) -> str:
    """The report as plain-text tables, one per section, then the profiles and skipped parts."""
    meta = report["meta"]
    lines = [
        f"attn-gui bench ({report['settings']['mode']}) {meta['date']}",
        f"device {meta['device']} ({meta['device_name']}), {meta['cpu_count']} CPUs, "
        f"{meta['torch_threads']} torch threads, torch {meta['torch']}"
        + (", load average {:.1f} {:.1f} {:.1f} at the start".format(*meta["load_average"])
           if "load_average" in meta else ""),
    ]
    others = {r["section"]: r["section"] for r in report["rows"] if r["section"] not in SECTION_TITLES}
    for section, title in {**SECTION_TITLES, **others}.items():  # a section without a title: under its name
        rows = [r for r in report["rows"] if r["section"] == section]
        if rows and any("compared_median" in r["extra"] or "compared_error" in r["extra"] for r in rows):
            lines += ["", title, *_compare_table(rows)]
        elif rows:
            lines += ["", title, *_table(rows)]
    for prof in report["profiles"]:
        lines += ["", f"Where compute() spends its time at T={prof['T']} "
                      f"({prof['total_ms']:.2f} ms per call, cProfile own time, {prof['runs']} calls)"]
        lines += [f"  {e['share'] * 100:5.1f}%  {e['ms']:9.3f} ms  {e['function']}" for e in prof["top"]]
    if report["notes"]:
        lines.append("")
        lines += [f"note: {_shown(n)}" for n in report["notes"]]
    if report["skipped"]:
        lines.append("")
        lines += [_shown(f"skipped: {s['name']}: {s['reason']}") for s in report["skipped"]]
    return "\n".join(lines)


def check_writable(path: str | os.PathLike) -> None:
    """Fail now if :func:`write_json` could not write ``path``.

    Creates the parent folder as :func:`write_json` would; a file already at ``path``
    is left as it is, a new one is removed again.

    Raises
    ------
    OSError
        ``cannot write <path>: <reason>``.
    """
    path = Path(path)
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
        if not existed:
            path.unlink()
    except FileExistsError as exc:  # only mkdir raises it: a parent is a file
        raise OSError(f"cannot write {path}: {path.parent} is not a folder") from exc
    except OSError as exc:
        raise OSError(f"cannot write {path}: {exc.strerror or exc}") from exc


def write_json(report: dict[str, Any], path: str | os.PathLike) -> None:
    """Write the report as indented JSON, creating the parent folder if needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
