"""Attention Explorer: watch self-attention being computed, one heatmap per step."""


def __getattr__(name: str):
    """``__version__``, looked up on first use: importing the package stays instant (``launch``)."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("attn-gui")
        except PackageNotFoundError:  # running from a source tree that was never installed
            found = "0.0.0+unknown"
        globals()["__version__"] = found
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
