"""What the window and the exports show, without Qt: frames, map data, labels, formats, walks.

Everything here is plain Python, numpy and torch, so it runs (and is tested) with no display
and no PySide6; ``render`` draws it, ``ui`` wires it to controls.
"""
