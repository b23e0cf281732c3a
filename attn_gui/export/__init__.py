"""Exports: every map as PNG/SVG, the whole figure, every tensor as .npy/.csv, and a manifest.

``arrays`` and ``files`` need no Qt (an arrays-only export runs without PySide6);
``images`` draws through ``render``; ``bundle.export_all`` writes a whole folder. What a
folder holds is described in ``bundle``.
"""
