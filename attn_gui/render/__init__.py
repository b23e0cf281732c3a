"""Drawing only: pyqtgraph heatmaps, the figure of every map, the model view, offscreen rendering.

Importing this package imports PySide6 and pyqtgraph and sets pyqtgraph's global options
(row-major images, white background) once, in ``style``.
"""

from . import style  # noqa: F401 - pyqtgraph's global options, before any item is made
