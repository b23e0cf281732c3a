"""Attention Explorer: watch self-attention being computed, one heatmap per step."""


PUBLIC = {"show": "api", "to_html": "api", "register": "engine.model.interop.memory",  # name: its module
          "to_lens": "engine.model.interop.lens"}


def __getattr__(name: str):
    """``__version__`` and the Python API (``show``, ``to_html``, ``register``, ``to_lens``), looked up on first use:
    importing the package stays instant (``launch``)."""
    if name == "notebook":  # attn_gui.notebook.view(...) after a bare ``import attn_gui``
        from importlib import import_module

        return import_module(f"{__name__}.notebook")
    if name in PUBLIC:
        from importlib import import_module

        found = getattr(import_module(f"{__name__}.{PUBLIC[name]}"), name)
        globals()[name] = found
        return found
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("attn-gui")
        except PackageNotFoundError:  # running from a source tree that was never installed
            found = "0.0.0+unknown"
        globals()["__version__"] = found
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
