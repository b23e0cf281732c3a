"""What the config needs to know about a model without loading it (no heavy imports here)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    """The fixed facts of one pretrained model.

    Attributes
    ----------
    name : str
        The config's ``model`` value ("minilm-l6").
    label : str
        Human name for menus and messages.
    module : str
        The module in ``attn_gui.engine.sources`` that implements it; it defines ``Source``.
    layers, heads, d_model, d_k, d_v : int
        The model's sizes (d_k and d_v per head).
    max_tokens : int
        The most tokens (special tokens included) the model reads.
    has_bias : bool
        Whether its Q, K, V and output projections add a bias.
    special_tokens : tuple of str
        Tokens the model adds itself ([CLS], [SEP]); views may hide them.
    """

    name: str
    label: str
    module: str
    layers: int
    heads: int
    d_model: int
    d_k: int
    d_v: int
    max_tokens: int
    has_bias: bool
    special_tokens: tuple[str, ...] = ()
