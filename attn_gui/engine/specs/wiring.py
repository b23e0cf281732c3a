"""The residual wiring of a decoder layer (``Block``), one row per family (``BLOCKS``): plain data, read
by the readers while checking a file, by the plan and by the forward."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    """A decoder layer's residual wiring: which norm each part reads through and writes through.

    Each name is a norm's weight prefix within the layer (``model.layers.N.<name>``), or None where there is none.
    attn_norm: before attention (X); attn_post: attention's output normed before its residual; mlp_norm: before the
    MLP; mlp_post: the MLP's output normed before its residual; parallel: the MLP reads the layer's input residual
    (attention and the MLP side by side), not the residual after attention.
    """

    attn_norm: str | None
    attn_post: str | None
    mlp_norm: str | None
    mlp_post: str | None
    parallel: bool = False

    @property
    def norms(self) -> tuple[str, ...]:
        """Every norm of the layer, by prefix."""
        return tuple(n for n in (self.attn_norm, self.attn_post, self.mlp_norm, self.mlp_post) if n is not None)


BLOCKS = {  # ``Family.block``: the residual wiring of each family's layers
    "pre": Block("input_layernorm", None, "post_attention_layernorm", None),  # Llama, Qwen, Mistral, Phi-3, GPT-2
    "parallel": Block("input_layernorm", None, "post_attention_layernorm", None, parallel=True),  # GPT-NeoX
    "sandwich": Block("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                      "post_feedforward_layernorm"),  # Gemma 2 and 3
    "post": Block(None, "post_attention_layernorm", None, "post_feedforward_layernorm"),  # OLMo 2
}
