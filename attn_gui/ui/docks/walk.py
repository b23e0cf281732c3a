"""The step panel: follow one query token through every step, with live numbers."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from ...engine import AttentionResult
from ...present.frame import Frame
from ...present.state import ViewState
from ...present.walk import HINT, walk_html
from ..sight import in_sight
from . import DockPanel


class TokenFocus(DockPanel, QtWidgets.QTextBrowser):
    """The walk of the selected query token (see ``present.walk.walk_html``).

    The walk is written only while the panel is on screen: a hidden panel (a closed dock,
    a tab behind another) keeps just the request and writes it when it is shown.
    The scroll bar stays on, so a walk of another length never re-flows the panel twice.
    """

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("tokenFocus")
        self.setOpenLinks(False)
        self.setVerticalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        self._request: tuple | None = None
        self._shown: tuple | None = None
        self.setHtml(HINT)

    def show_walk(self, result: AttentionResult | None, token: int | None, head: int) -> None:
        """Show the walk of ``token`` through ``head`` of ``result`` (the hint when there is none)."""
        self._request = (result, token, head)
        if in_sight(self):
            self._write()
        else:
            self._shown = None  # written when shown; holds no old result meanwhile

    def show_frame(self, frame: Frame, state: ViewState) -> None:
        """The window draws ``frame``: the walk of the state's token and head."""
        self.show_walk(frame.result, state.token, state.head)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self._write()

    def came_into_sight(self, visible: bool) -> None:
        """Write the kept request when the panel's tab is brought to the front (docks' ``visibilityChanged``)."""
        if visible:
            self._write()

    def _write(self) -> None:
        if self._request is None or self._shown is not None and (
                self._request[0] is self._shown[0] and self._request[1:] == self._shown[1:]):
            return  # the same result (compared by identity: it holds tensors), token and head
        result, token, head = self._shown = self._request
        if result is None or token is None or token >= result.seq_len:
            self.setHtml(HINT)
        else:
            self.setHtml(walk_html(result, token, min(head, result.heads - 1)))
