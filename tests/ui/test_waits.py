"""How the window tests wait (issue 55): QTest.qWait holds the GIL here (PySide6), so a test that waited with it
for the worker thread's compute would starve that thread (a spinning thread ran 138,303 loops in 1 s of qWait
against 2,319,975 in 1 s of QEventLoop.exec and 2,703,478 in 1 s of qtbot.wait: pytest-qt 4.5.0, PySide6 6.11.3,
2 cores shared with other work).
pytest-qt's wait, waitUntil and waitSignal run a QEventLoop; the tests wait only through them."""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_waits_with_qwait():
    direct = [p.relative_to(TESTS).as_posix() for p in TESTS.rglob("*.py")
              if p.name != "test_waits.py" and re.search(r"\bqWait\b", p.read_text(encoding="utf-8"))]
    assert direct == []


def test_pytest_qt_waits_in_an_event_loop():
    """The pytest-qt the lock installs waits in a MultiSignalBlocker (a QEventLoop), not in QTest.qWait."""
    import inspect

    from pytestqt.qtbot import QtBot

    assert "qWait" not in inspect.getsource(QtBot.wait) and "MultiSignalBlocker" in inspect.getsource(QtBot.wait)
