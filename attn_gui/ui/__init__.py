"""The Qt window: thin views over the engine. Importing this imports PySide6 and pyqtgraph."""

from .main_window import MainWindow

__all__ = ["MainWindow"]
