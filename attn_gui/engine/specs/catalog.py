"""The models attn-gui knows by name before reading any file: the bundled ones (``MODELS``, plain data that
config's model choices list) and the model objects registered in memory (``REGISTERED``, filled by
``model.interop.memory.register``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .families import FAMILIES, MAX_TOKENS, decoder_spec
from .spec import ModelSpec

MODELS: Mapping[str, ModelSpec] = MappingProxyType({  # the bundled models, by name
    spec.name: spec
    for spec in (
        ModelSpec("minilm-l6", "MiniLM-L6 (all-MiniLM-L6-v2)", module="minilm", layers=6, heads=12,
                  d_model=384, d_k=32, d_v=32, max_tokens=MAX_TOKENS, has_bias=True,
                  special_tokens=("[CLS]", "[SEP]"), norm="layer", block="post_ln"),
        decoder_spec("smollm2-135m", "SmolLM2-135M (decoder)", "smollm2", FAMILIES["llama"],
                     weights="the weights are 4-bit (Q4_1) approximations of the published SmolLM2-135M-Instruct",
                     layers=30, heads=9, kv_heads=3, d_model=576, d_k=64, d_v=64, max_tokens=8192, has_bias=False,
                     rope_base=100000.0, special_tokens=("<|endoftext|>", "<|im_start|>", "<|im_end|>")),
    )
})


REGISTERED: dict[str, ModelSpec] = {}  # model objects in memory, by the name ``memory.register`` gave them
