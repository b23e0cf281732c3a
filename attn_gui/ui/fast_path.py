"""The fast path offered under the sentence: a decoder of a billion parameters or more, on the CPU with float32
matmuls, gets one line with what float32 and bfloat16 matmuls cost here and what bfloat16 changes
(``present.fast_path``), and two links. A click switches the dtype and is remembered for that model (the settings'
``matmuls``); a model chosen bfloat16 before opens with it again, and the line says so, with a link back. Nothing
changes without a word: the maps' titles and the status line say which arithmetic drew them.
"""

from __future__ import annotations

from typing import Any

from PySide6 import QtCore

from ..engine import AttentionConfig
from ..engine.model.plan import plan
from ..present import fast_path
from .compute_flow import model_name


class FastPath(QtCore.QObject):
    """The offer line of ``window`` (a ``MainWindow``: its panel's ``offerNote``, its settings, ``edit_config``)."""

    def __init__(self, window: Any):
        super().__init__(window)
        self.window = window
        self.label = window.panel.offerNote
        self.label.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.LinksAccessibleByMouse
                                           | QtCore.Qt.TextInteractionFlag.LinksAccessibleByKeyboard)
        self.label.linkActivated.connect(self.choose)
        self.model: str | None = None  # the model the line speaks of
        self.applied: set[str] = set()  # models switched to their remembered bfloat16 in this window

    def _parameters(self, config: AttentionConfig) -> int | None:
        p = plan(config)
        return p.source.parameters() if p.can.decoder else None

    def check(self, config: AttentionConfig) -> None:
        """Offer, say or hide the line for ``config``'s model: called once its model is in memory and with every
        frame drawn."""
        model = config.model
        if model is None or config.device != "cpu":
            return self.hide()
        parameters = self._parameters(config)
        if parameters is None:  # not in memory yet: the next call (the load done) decides
            return None
        big = parameters >= fast_path.FAST_PATH_PARAMETERS
        choice = self.window.settings.matmuls(model)
        label = model_name(config)
        if fast_path.offered(config, parameters) and choice is None:
            return self.show(model, fast_path.offer_text(label, parameters))
        if big and config.dtype == "float32" and choice == "bfloat16" and model not in self.applied:
            self.applied.add(model)  # once: a later float32 chosen in the controls stays float32
            self.show(model, fast_path.chosen_text(label, parameters))
            QtCore.QTimer.singleShot(0, lambda: self.window.edit_config({"dtype": "bfloat16"}))
            return None
        if big and config.dtype == "bfloat16" and model == self.model and self.label.isVisible():
            return None  # the line that said so stays while the bfloat16 run computes
        return self.hide()

    def show(self, model: str, text: str) -> None:
        self.model = model
        self.label.setText(text)
        self.label.show()

    def hide(self) -> None:
        self.model = None
        self.label.hide()

    def choose(self, choice: str) -> None:
        """A link clicked: ``choice`` ("bfloat16" or "float32") remembered for the model and applied."""
        model = self.model
        if model is None or choice not in fast_path.CHOICES:
            return
        self.window.settings.set_matmuls(model, choice)
        self.applied.add(model)  # chosen here: a later change in the controls is the person's too
        self.hide()
        if self.window.state.config.dtype != choice:
            self.window.edit_config({"dtype": choice})
