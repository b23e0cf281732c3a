"""Attention Explorer in a notebook without a Qt event loop: the shared page, inline (``view``).

>>> from attn_gui import notebook
>>> notebook.view(sentence="When in doubt look intelligent", heads=2)  # doctest: +SKIP

Jupyter shows any object with ``_repr_html_``; this module needs no IPython. The page is
``attn_gui.to_html``'s, in an ``iframe srcdoc`` so its script and styles stay inside it.
"""

from __future__ import annotations

import html
import os
from typing import Any

FRAME_HEIGHT = 820  # pixels of the notebook's output the page's frame takes (it scrolls inside)


class Page:
    """A page of the explorer: shown inline by Jupyter, ``save``d as one HTML file, or read as ``html``."""

    def __init__(self, text: str, result=None):
        self.html = text
        self.result = result  # the AttentionResult drawn (its tensors), or None

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" style="width:100%;height:{FRAME_HEIGHT}px;'
                f'border:1px solid #ccd" sandbox="allow-scripts"></iframe>')

    def save(self, path: str | os.PathLike):
        """Write the page to ``path`` (.html), whole or not at all; the path."""
        from pathlib import Path

        from .export.files import ExportError, atomic_write

        path = Path(path)
        if path.suffix.lower() not in (".html", ".htm"):
            raise ExportError(f"a page is one HTML file: name it .html (got {path.name})")
        atomic_write(path, self.html.encode("utf-8"))
        return path


def view(model: Any = None, tokenizer: Any = None, sentence: str | None = None, **options: Any) -> Page:
    """Compute ``sentence`` with ``model`` (as ``attn_gui.show`` takes them) and return its page, shown inline.

    ``model`` may also be an ``AttentionResult`` (then nothing is computed) or a window (its state).
    """
    from .api import _state, to_html
    from .engine import AttentionResult, compute

    if isinstance(model, AttentionResult) or hasattr(model, "state"):
        return Page(to_html(model, **options), getattr(model, "result", model))
    state = _state(model, tokenizer, sentence, dict(options))
    from .render.offscreen import ensure_app

    ensure_app(offscreen=True)  # the maps are drawn offscreen: no window, no event loop
    result = compute(state.config)
    return Page(to_html(result, state.head, state.token, state.hide_special, state.scales, state.focus), result)
