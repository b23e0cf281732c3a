"""The first hour, third round (issue 62): what a new user met in the window."""

from PySide6 import QtWidgets

from attn_gui.present.docks import DOCK_ROWS
from attn_gui.ui.sight import in_sight


def current_tab(window, title: str) -> bool:
    """Whether the dock titled ``title`` is the current tab of its tab group (a dock alone has no tab bar)."""
    for bar in window.findChildren(QtWidgets.QTabBar):
        titles = [bar.tabText(i) for i in range(bar.count())]
        if title in titles and bar.isVisible():
            return bar.tabText(bar.currentIndex()) == title
    return False


def test_a_view_entry_brings_its_tabified_dock_in_front_and_never_hides_it(window, qtbot):
    actions = {a.text(): a for a in window.menus.view.actions()}
    for row in DOCK_ROWS:
        assert row.title in actions, row.title  # every dock is listed, Circuit and Lessons included
    for name in ("interventions", "circuit", "train", "metrics", "walk", "lessons"):
        title = next(r.title for r in DOCK_ROWS if r.name == name)
        for _ in range(2):  # Qt's toggle hid the dock at the first click and showed it behind at the second
            actions[title].trigger()
            dock = window.docks.dock(name)
            qtbot.waitUntil(lambda dock=dock: in_sight(dock), timeout=5000)
            assert dock.isVisible() and current_tab(window, title), (name, title)
