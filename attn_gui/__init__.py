"""Attention Explorer: watch self-attention being computed, one heatmap per step."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("attn-gui")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
