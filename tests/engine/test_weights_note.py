"""What the window says of a GGUF file's quantized weights is what the reader does with them in each dtype (issue 62:
a bfloat16 run's note said they were "dequantized to float32 layer by layer")."""

import gguf
import pytest
import torch

from attn_gui.engine import AttentionConfig, compute, model_spec
from attn_gui.engine.model.decoder import source as decoder
from attn_gui.engine.readers import packed
from gguf_writing import tiny, write_gguf, byte_level_vocab  # (tests/)


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_0"])
def test_the_weights_note_says_how_each_dtype_multiplies(tmp_path, kind):
    hf = tiny("llama", len(byte_level_vocab()[0]), seed=4)
    quant = getattr(gguf.GGMLQuantizationType, kind)
    path = write_gguf(tmp_path / "q.gguf", hf, "llama", "byte", "Q", quant=quant)
    note = model_spec(path).about[-1]
    weights = decoder.load_model(path).weights
    key = "model.layers.0.self_attn.q_proj.weight"
    assert weights.read(key).dtype == torch.float32  # float32 and float64 runs read it dequantized to float32
    assert "in float32 and float64 each layer's are dequantized to float32" in note
    made = weights.matrix(key)  # what a bfloat16 run multiplies
    if isinstance(made, packed.Int8Matrix):
        assert f"in bfloat16 the matrices multiply {kind} as int8 values with their scales" in note
    elif isinstance(made, packed.Int4Matrix):
        assert f"in bfloat16 the matrices multiply {kind} packed for PyTorch's int4 kernel" in note
    else:
        assert "in bfloat16 they are dequantized and rounded to bfloat16" in note
    result = compute(AttentionConfig(model=str(path), dtype="bfloat16", sentence="the cat"))
    assert note in result.notes  # the note the bfloat16 run's status shows
