"""Q4_0, Q4_1 and Q8_0 blocks dequantized by our numpy path equal the ``gguf`` package's ``dequantize`` (the
reference ggml's ``dequantize_row_*`` written out) bit for bit: on quantized random matrices, and on random
blocks whose every byte is random except finite float16 scales (``readers.gguf.finite`` refuses the others)."""

import numpy as np
import pytest
import torch
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize, quantize

from attn_gui.engine.readers.quantized import dequantize


def _random_blocks(kind: GGMLQuantizationType, rows: int, width: int, rng) -> np.ndarray:
    block, size = GGML_QUANT_SIZES[kind]
    raw = rng.integers(0, 256, (rows, width // block * size), dtype=np.uint8)
    blocks = raw.reshape(-1, size)
    scales = 2 if kind == GGMLQuantizationType.Q4_1 else 1  # Q4_1: d and m
    for s in range(scales):
        finite = rng.standard_normal(blocks.shape[0]).astype(np.float16) * np.float16(0.05)
        blocks[:, 2 * s:2 * s + 2] = finite.view(np.uint8).reshape(-1, 2)
    return raw


@pytest.mark.parametrize("kind", ["Q4_0", "Q4_1", "Q8_0"])
@pytest.mark.parametrize("rows, width", [(1, 32), (7, 96), (192, 576), (1536, 576)])
def test_blocks_of_32_equal_gguf_bit_for_bit(kind, rows, width):
    kind = GGMLQuantizationType[kind]
    rng = np.random.default_rng(rows * width)
    w = (rng.standard_normal((rows, width)) * rng.choice([1e-3, 1.0, 40.0], (rows, 1))).astype(np.float32)
    for raw in (quantize(w, kind), _random_blocks(kind, rows, width, rng)):
        ours = dequantize(raw, int(kind), width)
        theirs = torch.from_numpy(np.asarray(gguf_dequantize(raw, kind), np.float32).reshape(rows, width))
        assert ours.dtype == torch.float32 and ours.shape == (rows, width)
        assert torch.equal(ours, theirs)
