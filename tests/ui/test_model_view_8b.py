"""The 8B's model view (32 layers x 32 heads, 8 K/V heads) at real size (issue 62, item 5), read as pixels."""

import numpy as np
import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from attn_gui.render.model_view import ModelView

L, H, KV, T = 32, 32, 8, 6  # Llama-3-8B's layers, query heads and K/V heads; a six-token input


@pytest.fixture
def view(qtbot):
    scroll = QtWidgets.QScrollArea()  # as the window's dock holds it (MainWindow.add_dock)
    qtbot.addWidget(scroll)
    scroll.setWidgetResizable(True)
    view = ModelView()
    scroll.setWidget(view)
    scroll.resize(1366, 250)  # the model view's dock at a 1366 x 768 first start: it scrolls down the layers
    scroll.show()
    qtbot.waitExposed(scroll)
    weights = np.random.default_rng(0).dirichlet(np.ones(T), size=(L, H, T))  # rows of alpha sum to 1
    view.set_weights(weights, layer=3, head=1, kv_heads=KV, sink=weights[:, :, 1:, 0].mean(-1))
    qtbot.waitUntil(lambda: abs(view.ci.size().width() - view.width()) <= 2)
    yield view  # the scroll area lives until the test ends


def ink(view, rect: QtCore.QRectF) -> int:
    """Pixels of the view's ``rect`` (view coordinates) darker than light grey: text or thumbnails."""
    image = view.grab(rect.toAlignedRect()).toImage().convertToFormat(QtGui.QImage.Format.Format_Grayscale8)
    pixels = np.frombuffer(image.constBits(), np.uint8, image.sizeInBytes())
    return int((pixels < 160).sum())


def test_the_thumbnails_fill_the_width_of_their_plot(view):
    # the grid was as tall as a 250 px dock's scroll allowed at 12 px thumbnails: 400 of its 850 px wide, the
    # rest blank; it grows down (the dock scrolls) to fill its width
    grid = view.mapFromScene(view.image.sceneBoundingRect()).boundingRect()
    plot = view.mapFromScene(view.plot.getViewBox().sceneBoundingRect()).boundingRect()
    assert grid.width() >= 0.85 * plot.width(), (grid, plot)


def test_the_sink_maps_first_kv_label_is_drawn(view):
    # the sink map beside the grid labelled its columns from "K/V 2": "K/V 1", centred on its first column,
    # ran past the axis's left edge and pyqtgraph left it out
    box = view.sinkPlot.getViewBox()
    first = view.mapFromScene(box.mapViewToScene(QtCore.QPointF(T / 2, 0))).x()
    axis = view.mapFromScene(view.sinkPlot.getAxis("top").sceneBoundingRect()).boundingRect()
    assert ink(view, QtCore.QRectF(first - 12, axis.top(), 24, axis.height())) > 20
