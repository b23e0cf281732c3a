"""The presets: named configs that each show one idea (the tutorials' walks, RoPE, ALiBi, grouped-query
attention, windows, sinks, cross-attention), every one a plain ``AttentionConfig``."""

from __future__ import annotations

from ..base.errors import ConfigError
from .config import AttentionConfig
from .options import _short


PRESETS: dict[str, AttentionConfig] = {
    # The explorer's start: the "follow x_2 'in'" walk, d = 5, d_q = d_k = d_v = 3, stable inputs.
    "default": AttentionConfig(),
    # Seed 004: torch.manual_seed(42); inputs = torch.rand(4, 3); W = torch.rand(3, 2), q = x W.
    "tutorial-uniform": AttentionConfig(
        sentence="I am learning this", inputs="uniform", seed=42, layout="row",
        d_model=3, d_k=2, d_v=2, heads=1, init="uniform",
    ),
    # Raschka's walk: nn.Embedding(6, 16) after manual_seed(123), reseed, W = torch.rand(24, 16), q = W x.
    "tutorial-embedding": AttentionConfig(
        sentence="Life is short, eat dessert first", inputs="embedding", seed=123, weight_seed=123, layout="column",
        d_model=16, d_k=24, d_v=28, heads=1, init="uniform",
    ),
    # RoPE: a repeated phrase gets the same score for the same distance; shift it, nothing changes.
    "rope": AttentionConfig(
        sentence="the cat saw the cat saw the cat", positional="rope", rope_base=100.0,
        d_model=8, d_k=8, d_v=4, heads=1, init="scaled_normal", seed=7,
    ),
    # ALiBi (Press et al.): no positions in X; each head's scores fall off linearly with the distance.
    "alibi": AttentionConfig(
        sentence="a long road winds through the quiet green hills", positional="alibi", causal=True,
        d_model=16, d_k=4, d_v=4, heads=4, init="scaled_normal",
    ),
    # Grouped-query attention (Llama 2 70B, SmolLM2): 4 query heads read 2 K/V heads.
    "grouped-query": AttentionConfig(
        sentence="four queries share two keys and values", heads=4, kv_heads=2,
        d_model=16, d_k=4, d_v=4, init="scaled_normal", causal=True,
    ),
    # Sliding-window attention (Mistral): each query sees itself and the 2 keys before it.
    "sliding-window": AttentionConfig(
        sentence="each word here sees only its nearest neighbours and never the far ones",
        causal=True, window=3, d_model=8, d_k=4, d_v=4, heads=1, init="scaled_normal",
    ),
    # Attention sinks (StreamingLLM): the window of 3 plus the first token, visible to every query.
    "attention-sinks": AttentionConfig(
        sentence="the first token stays in view while the window slides along the text",
        causal=True, window=3, sink_tokens=1, d_model=8, d_k=4, d_v=4, heads=1, init="scaled_normal",
    ),
    # The Annotated Transformer's MultiHeadedAttention: four nn.Linear(d, d), biases, nn.Linear's init.
    "annotated-transformer": AttentionConfig(
        sentence="The Annotated Transformer projects with nn.Linear", bias=True, init="linear",
        d_model=12, d_k=4, d_v=4, heads=3,
    ),
    # Cross-attention (an encoder-decoder's): English queries read the keys and values of a French sentence.
    "cross-attention": AttentionConfig(
        sentence="the cat sat on the mat", source_sentence="le chat était assis sur le tapis",
        d_model=8, d_k=4, d_v=4, heads=2, init="scaled_normal", positional="sinusoidal",
    ),
}


def preset(name: str) -> AttentionConfig:
    """The named preset config; ``ConfigError`` naming the choices otherwise."""
    try:
        return PRESETS[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown preset {_short(name)}; choose one of {', '.join(PRESETS)}") from None


__all__ = ["PRESETS", "preset"]
