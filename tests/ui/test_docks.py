"""The dock table: every row has its panel, its dock, its View entry; the panels follow one protocol."""

from attn_gui.present.docks import DOCK_ROWS
from attn_gui.ui.docks import FACTORIES


def test_every_row_has_a_factory_and_every_factory_a_row():
    assert set(FACTORIES) == {row.name for row in DOCK_ROWS}
    assert len({row.object_name for row in DOCK_ROWS}) == len(DOCK_ROWS)


def test_every_dock_has_its_entry_in_the_view_menu(window):
    actions = window.menus.view.actions()
    for row in DOCK_ROWS:
        window.show_dock(row.name)  # a lazy dock (Lessons) is made here
        dock = window.docks.dock(row.name)
        assert dock.objectName() == row.object_name and dock.windowTitle() == row.title
        assert window.docks.entries[row.name] in actions and row.view_menu, row.name
    titles = [a.text() for a in actions]
    assert "Circuit" in titles and "Lessons" in titles  # the guides and lesson 7 say View → Circuit


def test_every_panel_follows_the_protocol(window):
    for row in DOCK_ROWS:
        window.show_dock(row.name)
        panel = window.docks.panel(row.name)
        if "state" in row.follows:
            assert callable(panel.follow), row.name
        if "frame" in row.follows:
            assert callable(panel.show_frame), row.name
        if row.worker:
            assert callable(panel.shutdown), row.name
