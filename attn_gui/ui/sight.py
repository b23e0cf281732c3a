"""Whether a widget is really on screen.

Qt keeps the docks of a tab group visible (``isVisible()``) and moves the ones behind
the current tab out of the window, so a panel asks for its visible region instead:
what is behind another tab, closed or not laid out yet computes nothing.
"""

from __future__ import annotations

from PySide6 import QtWidgets


def in_sight(widget: QtWidgets.QWidget) -> bool:
    """Whether any part of ``widget`` is on screen (shown and not behind another tab)."""
    return widget.isVisible() and not widget.visibleRegion().isEmpty()
