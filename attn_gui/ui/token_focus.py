"""The step panel: follow one query token through every step, with live numbers."""

from __future__ import annotations

from PySide6 import QtWidgets

from ..engine import AttentionResult
from ..present.walk import HINT, walk_html


class TokenFocus(QtWidgets.QTextBrowser):
    """The walk of the selected query token (see ``present.walk.walk_html``)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("tokenFocus")
        self.setOpenLinks(False)
        self.setHtml(HINT)

    def show_walk(self, result: AttentionResult | None, token: int | None, head: int) -> None:
        """Show the walk of ``token`` through ``head`` of ``result`` (the hint when there is none)."""
        if result is None or token is None or token >= result.seq_len:
            self.setHtml(HINT)
            return
        self.setHtml(walk_html(result, token, min(head, result.heads - 1)))
