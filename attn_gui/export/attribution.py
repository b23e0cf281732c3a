"""``attn-gui attribute``'s files: the direct logit attribution as CSV and PNG, written all or nothing."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..engine.analysis.attribution.logit import LogitAttribution
from ..present.attribution import dla_map, dla_rows, what_dla
from ..render.offscreen import dispose, render_map
from .folder import Cancelled, Target, unwritable
from .images import export_image

NAMES = ["components.csv", "heads.csv", "dla.png"]


def write_attribution(a: LogitAttribution, token_text, folder: str | os.PathLike, overwrite: bool = False,
                      cancel: Callable[[], bool] | None = None) -> Path:
    """Write ``a`` into ``folder``: components.csv (every component's term and the total), heads.csv (the
    layers x heads grid) and dla.png (the grid on a diverging scale). In a hidden folder first: the target
    gets every file or none. ``cancel`` (Ctrl-C, SIGTERM), asked between files and before the move: ``Cancelled``,
    the hidden folder removed."""
    target = Target(folder, overwrite)
    target.check_names(NAMES)
    stage = target.open()
    try:
        what = what_dla(a, token_text)
        lines = [f"# direct term of each component in {what} at the last token", "component,term"]
        lines += [f'"{name}",{value:.9g}' for name, value in dla_rows(a)]
        (stage / "components.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        if cancel is not None and cancel():
            raise Cancelled(folder)
        grid = [f"# direct term of each head in {what}", ",".join(["layer"] + [f"head {j + 1}" for j in
                                                                            range(a.heads.shape[1])])]
        grid += [",".join([str(i + 1), *(f"{v:.9g}" for v in row)]) for i, row in enumerate(a.heads.tolist())]
        (stage / "heads.csv").write_text("\n".join(grid) + "\n", encoding="utf-8")
        view = render_map(dla_map(a, token_text))
        try:
            export_image(view, stage / "dla.png")
        finally:
            dispose(view)
        if cancel is not None and cancel():
            raise Cancelled(folder)
    except OSError as exc:  # a full disk: one line, the previous export kept
        target.abort()
        raise unwritable(exc, target) from None
    except BaseException:
        target.abort()
        raise
    target.commit(NAMES)
    return target.path
