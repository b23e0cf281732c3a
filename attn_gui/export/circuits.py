"""``attn-gui circuit``'s files, written all or nothing (``folder.Target``): the edges (CSV or Parquet), the nodes, the
faithfulness curve (CSV, PNG, SVG), the graph (PNG, SVG) and a manifest with the run's figures."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Callable
from pathlib import Path

from ..engine.analysis.circuits import Circuit
from ..present.circuits import edge_rows, faithfulness_svg, graph_size, graph_svg, node_rows
from .files import ExportError
from .folder import MANIFEST, Cancelled, Target, unwritable

EDGE_FORMATS = ("csv", "parquet")
EDGE_COLUMNS = ("rank", "writer", "reader", "reader_kind", "score")


def names(fmt: str, faithful: bool) -> list[str]:
    """The files ``write_circuit`` writes, the manifest last."""
    out = [f"edges.{fmt}", "nodes.csv", "graph.svg", "graph.png"]
    if faithful:
        out += ["faithfulness.csv", "faithfulness.svg", "faithfulness.png"]
    return [*out, MANIFEST]


def check_format(fmt: str) -> None:
    """Refuse an edge format this install cannot write, before any compute."""
    if fmt not in EDGE_FORMATS:
        raise ExportError(f"--format must be one of {', '.join(EDGE_FORMATS)}, not {fmt!r}")
    if fmt == "parquet":
        try:
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise ExportError("Parquet needs pyarrow: pip install 'attn-gui[corpus]', or use --format csv") from None


def _csv(header: tuple[str, ...] | list[str], rows) -> bytes:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return text.getvalue().encode("utf-8")


def _edges(found: Circuit, path: Path, fmt: str) -> None:
    rows = [(e.rank, e.writer, e.reader, e.kind, e.score) for e in edge_rows(found)]
    if fmt == "csv":
        path.write_bytes(_csv(EDGE_COLUMNS, [(*row[:4], f"{row[4]:.9g}") for row in rows]))
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = list(zip(*rows, strict=True)) if rows else [()] * len(EDGE_COLUMNS)
    table = pa.table({name: list(col) for name, col in zip(EDGE_COLUMNS, columns, strict=True)})
    pq.write_table(table, path)


def svg_png(svg: str, path: Path) -> None:
    """``svg`` rendered to a PNG at its own size (Qt's SVG renderer, offscreen)."""
    from PySide6 import QtCore, QtGui, QtSvg

    from ..render.offscreen import ensure_app
    from .images import png_bytes

    ensure_app(offscreen=True)
    renderer = QtSvg.QSvgRenderer(QtCore.QByteArray(svg.encode("utf-8")))
    if not renderer.isValid():
        raise ExportError("Qt could not read the SVG it was to render")
    size = renderer.defaultSize()
    image = QtGui.QImage(size, QtGui.QImage.Format.Format_ARGB32)
    image.fill(QtGui.QColor("white"))
    painter = QtGui.QPainter(image)
    try:
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
    finally:
        painter.end()
    path.write_bytes(png_bytes(image))


def summary(found: Circuit) -> dict:
    """The run's figures, as the manifest keeps them."""
    f = found.faithfulness
    return {"model": found.model, "task": found.task, "method": found.method, "metric": found.metric,
            "gradient_at": found.gradient_at if found.method == "eap" else None,
            "pairs": found.pairs, "clean": found.clean, "corrupt": found.corrupt, "edges": found.graph.n_edges,
            "smallest_circuit": None if f is None else f.smallest, "target": None if f is None else f.target}


def write_circuit(found: Circuit, folder: str | os.PathLike, fmt: str = "csv", k: int = 20,
                  overwrite: bool = False, cancel: Callable[[], bool] | None = None) -> Path:
    """Write ``found`` into ``folder``: edges.{csv,parquet} (every edge, largest |score| first), nodes.csv, the
    graph of the top ``k`` edges (SVG and PNG), the faithfulness curve (CSV, SVG, PNG) when measured and
    manifest.json. In a hidden folder first: the target gets every file or none. ``cancel`` (Ctrl-C, SIGTERM),
    asked between files: ``Cancelled``, the hidden folder removed and the target as it was."""

    def check() -> None:
        if cancel is not None and cancel():
            raise Cancelled(folder)

    check_format(fmt)
    target = Target(folder, overwrite)
    files = names(fmt, found.faithfulness is not None)
    target.check_names(files)
    stage = target.open()
    try:
        _edges(found, stage / files[0], fmt)
        check()
        (stage / "nodes.csv").write_bytes(_csv(["writer", "score"], [(n, f"{v:.9g}") for n, v in node_rows(found)]))
        svg = graph_svg(found, k, *graph_size(found.graph))
        (stage / "graph.svg").write_text(svg, encoding="utf-8")
        svg_png(svg, stage / "graph.png")
        check()
        curve = found.faithfulness
        if curve is not None:
            rows = [(k_, f"{v:.9g}") for k_, v in zip(curve.ks, curve.recovered, strict=True)]
            (stage / "faithfulness.csv").write_bytes(_csv(["k", "recovered"], rows))
            svg = faithfulness_svg(curve)
            (stage / "faithfulness.svg").write_text(svg, encoding="utf-8")
            svg_png(svg, stage / "faithfulness.png")
        manifest = {"attn_gui_export": 1, "files": files[:-1], "circuit": summary(found)}
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        check()
    except OSError as exc:  # a full disk: one line, the previous export kept
        target.abort()
        raise unwritable(exc, target) from None
    except BaseException:
        target.abort()
        raise
    target.commit(files)
    return target.path
