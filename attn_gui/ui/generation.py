"""The window's generate controller: Generate appends the model's most likely next token, step by step.

Each step runs on its own thread (``TaskThread``); the sentence it makes is computed and shown as a frame
before the next step starts. Editing the input meanwhile, or a failure, stops it.
"""

from __future__ import annotations

from typing import Any

from PySide6 import QtCore

from ..engine import AttentionConfig
from ..present.generation import GenerationStep, generate_step
from .worker import TaskThread


class Generation(QtCore.QObject):
    """Generate for ``window`` (a ``MainWindow``: its state, decoder panel, status bar and ``edit_config``).

    Attributes
    ----------
    steps : list of int or None
        [done, total] while Generate runs.
    step_running : bool
        A step is on the thread now.
    runner : TaskThread
        The generate thread.
    """

    def __init__(self, window: Any):
        super().__init__(window)
        self.window = window
        self.steps: list[int] | None = None
        self.step_running = False
        self.runner = TaskThread("attn-gui generate", self)
        self.runner.done.connect(self._on_generated)

    def generate(self, steps: int) -> None:
        """Append the model's most likely next token ``steps`` times, each step on the generate thread,
        each new sentence computed and shown as a frame before the next step starts."""
        if self.steps is not None or self.window.frame is None:
            return
        self.steps = [0, steps]
        self.window.panel.decoderPanel.set_running(True, 0, steps)
        self._next_step()

    def stop(self) -> None:
        """Stop generating after the step in progress (its token is still appended)."""
        if self.steps is not None:
            self.steps = None
            self.window.panel.decoderPanel.set_running(False)

    def shown(self, config: AttentionConfig) -> None:
        """The frame of ``config`` is shown in full: the next step, if one is due."""
        if self.steps is not None and not self.step_running and config == self.window.state.config:
            self._next_step()

    def shutdown(self) -> None:
        self.runner.shutdown()

    def _next_step(self) -> None:
        config = self.window.state.config
        self.step_running = True
        assert self.steps is not None
        self.window.statusLabel.setText(f"generating token {self.steps[0] + 1} of {self.steps[1]}…")
        self.runner.start(config, lambda: generate_step(config))

    def _on_generated(self, config: AttentionConfig, outcome: GenerationStep | Exception) -> None:
        self.step_running = False
        if self.steps is None:
            return  # stopped: the step is dropped
        window = self.window
        if config != window.state.config:  # the input was edited meanwhile: the person takes over
            self.stop()
            return
        if isinstance(outcome, Exception):
            self.stop()
            window._show_invalid(str(outcome).splitlines()[0])
            return
        self.steps[0] += 1
        done, total = self.steps
        if done >= total or outcome.stopped:
            self.stop()
        else:
            window.panel.decoderPanel.set_running(True, done, total)
        if not window.edit_config({"sentence": outcome.sentence}):
            self.stop()
        window.generated.emit(outcome)
