import os

# Qt tests never need a display; set before any Qt import.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
