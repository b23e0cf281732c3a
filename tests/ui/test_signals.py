"""Ctrl-C and SIGTERM while the window is open (issue 47): docs/guide/sessions.md promises one line and exit
130; the window exited 143 without a word. It now closes as File → Quit does, its settings saved."""

import os
import signal

import pytest
from PySide6 import QtCore

from attn_gui.engine import AttentionConfig
from attn_gui.ui.settings import Settings


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_closes_the_window_saves_its_state_and_exits_130(settings, monkeypatch, capsys, signum):
    from attn_gui.ui import app as A

    windows = []
    real = A.open_window
    monkeypatch.setattr(A, "open_window", lambda config=None, settings=None: windows.append(real(config)) or
                        windows[-1])

    def signal_once_drawn() -> None:  # the signal comes while Qt's event loop runs the window
        if windows and windows[0].frame is not None and not windows[0].canvas.busy:
            os.kill(os.getpid(), signum)
        else:
            QtCore.QTimer.singleShot(20, signal_once_drawn)

    QtCore.QTimer.singleShot(0, signal_once_drawn)
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert A.run_gui(AttentionConfig(heads=2), geometry=(1366, 768)) == 130
    assert capsys.readouterr().err == "attn-gui: interrupted\n"
    assert not windows[0].isVisible()
    assert Settings().state().config.heads == 2  # closed as Quit closes it: the state saved
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers  # put back
