"""Help → How to read the maps, and the View menu."""


from attn_gui.ui.help import HelpDialog


def test_help_has_the_steps_in_order_with_real_symbols_and_a_model_page(window, qtbot):
    window.menus.help.trigger()
    dialog = window.findChild(HelpDialog, "helpDialog")
    assert dialog.isVisible()
    pages = {dialog.tabs.tabText(i): dialog.tabs.widget(i).toPlainText() for i in range(dialog.tabs.count())}
    assert list(pages) == ["The steps", "The controls", "A pretrained model", "Mouse and keys"]
    steps = pages["The steps"]
    order = [steps.index(s) for s in ("X", "Q = X Wq", "ω = Q Kᵀ", "ω′ = ω / √dk", "α = softmax(ω′)", "Z = α V")]
    assert order == sorted(order)
    text = "\n".join(pages.values())
    assert "omega" not in text and "K^T" not in text and "sqrt" not in text
    assert "MiniLM" not in pages["A pretrained model"] and "layer" in pages["A pretrained model"]
    assert "Double-click a map" in pages["Mouse and keys"] and "Esc" in pages["Mouse and keys"]


def test_the_view_menu_opens_the_model_view(window):
    view_menu = window.menus.view
    model = next(a for a in view_menu.actions() if a.text() == "Model view")
    model.trigger()
    assert window.modelDock.isVisible()
