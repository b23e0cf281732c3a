"""The left panel: long token lists collapsed, no clipped or sideways-scrolled controls, docks restored."""

from PySide6 import QtCore, QtWidgets

from attn_gui.engine import AttentionConfig, tokens_for
from attn_gui.ui.controls import FEW_CHIPS


def y_of(panel, widget) -> int:
    return widget.mapTo(panel, QtCore.QPoint(0, 0)).y()


def test_seven_hundred_tokens_are_collapsed_and_the_controls_stay_in_place(window, qtbot):
    panel = window.panel
    before = y_of(panel, panel.headsSpin)
    sentence = " ".join(f"w{i}" for i in range(700))
    panel.sentenceInput.setPlainText(sentence)
    qtbot.waitUntil(lambda: window.frame.result.seq_len == 700, timeout=20000)
    tokens = tokens_for(AttentionConfig(sentence=sentence)).tokens
    text = panel.tokenChips.text()
    assert "700 tokens, show all" in text
    assert f"&nbsp;{tokens[FEW_CHIPS - 1]}<sub" in text and f"&nbsp;{tokens[FEW_CHIPS]}<sub" not in text
    qtbot.waitUntil(lambda: abs(y_of(panel, panel.headsSpin) - before) < 60)  # no longer pushed down

    panel.tokenChips.linkActivated.emit("all")
    dialog = panel.findChild(QtWidgets.QDialog, "tokenListDialog")
    assert dialog.isVisible() and dialog.windowTitle() == "All 700 tokens"
    listed = dialog.findChild(QtWidgets.QTextBrowser).toPlainText()
    assert all(t in listed for t in (tokens[0], tokens[350], tokens[699]))


def test_a_short_sentence_shows_every_chip_and_no_link(window):
    text = window.panel.tokenChips.text()
    assert "show all" not in text
    assert all(f"&nbsp;{t}<sub" in text for t in tokens_for(AttentionConfig()).tokens)


def test_at_1366_by_768_no_control_is_cut_and_tab_never_scrolls_sideways(window, qtbot):
    window.resize(1366, 768)
    narrowest = window.panel.minimumSizeHint().width()
    word = "supercalifragilisticexpialidociouslyextraordinarilylongword"
    window.panel.sentenceInput.setPlainText(f"{word} and more")
    qtbot.waitUntil(lambda: window.frame.result.tokens[0] == word)
    for _ in range(3):  # the layouts' requests are posted events
        QtWidgets.QApplication.sendPostedEvents()
    assert window.panel.minimumSizeHint().width() <= narrowest  # a long word wraps, never widens the panel
    scroll = window.findChild(QtWidgets.QScrollArea, "controlScroll")
    qtbot.waitUntil(lambda: window.panel.width() <= scroll.viewport().width())
    assert scroll.horizontalScrollBar().maximum() == 0
    edge = scroll.viewport().width()
    editors = window.panel.findChildren(QtWidgets.QAbstractSpinBox) + window.panel.findChildren(QtWidgets.QComboBox)
    for editor in editors:
        if editor.isVisible():  # the whole editor, arrows included, lies inside the panel's view
            right = editor.mapTo(scroll.viewport(), QtCore.QPoint(editor.width(), 0)).x()
            assert right <= edge and editor.width() >= editor.minimumSizeHint().width(), editor.objectName()
    window.panel.sentenceInput.setFocus()
    for _ in range(40):
        window.focusNextChild()
        assert scroll.horizontalScrollBar().value() == 0, QtWidgets.QApplication.focusWidget().objectName()
