"""Decoders run by attn-gui's own forward: its parts, the forward and the source."""
