"""Matmuls on a GGUF's blocks in bfloat16 (``readers/packed.py``, the config's dtype "bfloat16"). Peers: the ``gguf``
package's ``dequantize`` for what the blocks hold, PyTorch's own converter ``_convert_weight_to_int4pack_for_cpu`` for
the packed layout, a float64 product of the bfloat16-rounded operands for what the kernels compute, and transformers'
eager forward in float32 on the dequantized weights for α and the logits.

bfloat16 keeps 8 significant bits: x, each group's scale and zero point and each product are rounded to it (a
relative error of at most 2⁻⁹ each), the sums are float32. So a product equals the float64 product of the rounded
operands within 2⁻⁸ of its size, and the float32 product of the exact ones within 2⁻⁷ of Σ|x||w|. Through a model the
roundings add up layer by layer: the bounds on α and the logits below are what bfloat16 gives on these models.
"""

import gguf
import numpy as np
import pytest
import torch
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

from attn_gui.engine import AttentionConfig, ConfigError
from attn_gui.engine.model.registry import source
from attn_gui.engine.readers import packed
from gguf_writing import quantized_llama  # (tests/)
from transformers_peer import alphas_equal_transformers  # (tests/)

Q = gguf.GGMLQuantizationType
SENTENCE = "the cat sat on a mat and the dog ran"
EPS = 2.0 ** -8  # bfloat16's spacing at 1: a rounding moves a value by at most half of it, relative


def _raw(kind, rows, cols, rng, spread=0.02):
    """Rows of ``kind`` blocks for a (rows, cols) matrix of about ``spread``: quantized by ``gguf`` where it can, else
    random bytes with scales set so (ggml's block_q4_K and block_q5_K: d, dmin at bytes 0-3; block_q6_K: d at
    bytes 208-209)."""
    if kind in (Q.Q4_0, Q.Q4_1, Q.Q8_0):
        return quantize((rng.standard_normal((rows, cols)) * spread).astype(np.float32), kind)
    values, size = GGML_QUANT_SIZES[kind]
    raw = rng.integers(0, 256, (rows, cols // values, size), dtype=np.uint8)
    at = {Q.Q4_K: ((0, spread / 150), (2, spread / 20)), Q.Q5_K: ((0, spread / 300), (2, spread / 20)),
          Q.Q6_K: ((208, spread / 1400),)}[kind]
    # w = d sc q - dmin m (sc, m < 64, q < 16; Q5_K q < 32); w = d sc (q - 32) (|sc| < 128, q < 64)
    for byte, scale in at:
        raw[:, :, byte:byte + 2] = np.full(raw.shape[:2] + (1,), scale, dtype=np.float16).view(np.uint8)
    return raw.reshape(rows, -1)


INT4 = [Q.Q4_0, Q.Q4_1, Q.Q4_K]


@pytest.mark.parametrize("kind", INT4, ids=lambda k: k.name)
def test_4_bit_blocks_are_the_kernels_values_scales_and_zero_points(kind):
    """(q - 8) s + z equals gguf's dequantize; the packed bytes equal PyTorch's own converter's."""
    raw = torch.from_numpy(_raw(kind, 128, 512, np.random.default_rng(0)))
    q, s, z = packed.int4_parts(raw, int(kind), 512)
    w = (q.double() - 8) * s.double().repeat_interleave(32, 1) + z.double().repeat_interleave(32, 1)
    exact = torch.from_numpy(dequantize(raw.numpy(), kind)).double()
    assert torch.allclose(w, exact, rtol=2 ** -22, atol=0)  # float32's rounding of s and z (Q4_1: m + 8 d)
    theirs = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32), 2)
    assert torch.equal(packed.pack_blocks(raw, int(kind), 512), theirs)


def _bf16(t):
    return t.to(torch.bfloat16).double()


@pytest.mark.parametrize("kind", [*INT4, Q.Q8_0, Q.Q6_K], ids=lambda k: k.name)
def test_a_packed_product_is_the_bfloat16_product_of_the_blocks(kind):
    rng = np.random.default_rng(1)
    raw = torch.from_numpy(_raw(kind, 128, 512, rng))
    x = torch.from_numpy(rng.standard_normal((7, 512)).astype(np.float32))
    if kind in INT4:
        q, s, z = packed.int4_parts(raw, int(kind), 512)
        w = (q.double() - 8) * _bf16(s).repeat_interleave(32, 1) + _bf16(z).repeat_interleave(32, 1)
        m = packed.Int4Matrix.of_blocks(raw, int(kind), 512)
    else:  # each weight q s made in bfloat16 from the bfloat16 scale
        q, s = packed.int8_parts(raw, int(kind), 512)
        w = _bf16(q.double() * _bf16(s).repeat_interleave(512 // s.shape[1], 1))
        m = packed.Int8Matrix.of_blocks(raw, int(kind), 512)
    ours = m(x).double()
    theirs = _bf16(x) @ w.T  # float64 sums of the rounded operands
    assert ours.dtype == torch.float64 and ours.shape == (7, 128)
    assert torch.all((ours - theirs).abs() <= EPS * theirs.abs() + 1e-6 * theirs.abs().max())
    exact = x.double() @ torch.from_numpy(dequantize(raw.numpy(), kind)).double().T
    assert torch.all((ours - exact).abs() <= 2 * EPS * (x.double().abs() @ w.abs().T))


def test_q8_0_and_q6_k_values_and_scales_are_the_blocks():
    rng = np.random.default_rng(2)
    for kind in (Q.Q8_0, Q.Q6_K):
        raw = _raw(kind, 64, 512, rng)
        q, s = packed.int8_parts(torch.from_numpy(raw), int(kind), 512)
        w = q.float() * s.repeat_interleave(512 // s.shape[1], 1)
        assert torch.equal(w, torch.from_numpy(dequantize(raw, kind))), kind.name  # gguf's arithmetic, bit for bit


def _model(folder, kinds, seed=0):
    """A tiny Llama (``gguf_writing.quantized_llama``) whose matrices are written in ``kinds`` (name part -> ggml type,
    the first that matches, else Q4_0), weights of a trained model's spread (0.02), its own output matrix and norm
    gains around 1; transformers' eager Llama on the dequantized matrices."""
    kind_of = lambda key: next((k for part, k in kinds.items() if part in key), Q.Q4_0)  # noqa: E731
    return quantized_llama(folder / "mixed.gguf", kind_of, lambda w, kind, rng: _raw(kind, *w.shape, rng), ffn=512,
                           tied=False, gains=(1.0, 0.1), seed=seed)


# name part -> type, the first that matches (else Q4_0): Q4_K_M as llama-quantize lays it out; Q5_K has no kernel
MIXES = {"Q4_0": {}, "Q4_1": {"": Q.Q4_1}, "Q8_0": {"": Q.Q8_0}, "Q5_K": {"": Q.Q5_K},
         "Q4_K_M": {"v_proj": Q.Q6_K, "down_proj": Q.Q6_K, "lm_head": Q.Q6_K, "": Q.Q4_K}}


@pytest.fixture(scope="module", params=sorted(MIXES))
def mixed(request, tmp_path_factory):
    return _model(tmp_path_factory.mktemp(request.param), MIXES[request.param])


def test_bfloat16_matmuls_give_alpha_and_logits_within_bfloat16s_rounding(mixed):
    """Every layer's α (the model view's and the shown layer's, from one forward) within 1e-2
    of transformers in float32 on the dequantized weights, the logits within 2 % of their largest: what bfloat16's
    8 bits give through 2 layers (measured: α 2e-4 to 6e-4 with Q4_0, Q4_1 and Q8_0, up to 8.5e-3 with the
    K-quants' random scales, which make sharper scores; the logits 6e-3 to 7e-3)."""
    path, hf = mixed
    out, _, _ = alphas_equal_transformers(path, hf, SENTENCE, atol=1e-2, dtype="bfloat16")
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    run = source(path).forward(ids, "cpu", torch.bfloat16)
    theirs = out.logits[0, -1]
    assert (run.logits - theirs).abs().max() <= 0.02 * theirs.abs().max()
    exact = source(path).forward(ids, "cpu", torch.float32)  # the float32 path keeps its 1e-5
    assert torch.allclose(exact.logits, theirs, atol=1e-5, rtol=1e-5)


def test_bfloat16_is_refused_where_it_is_not_run():
    with pytest.raises(ConfigError, match="bfloat16 is for a decoder model's weight matmuls"):
        AttentionConfig(sentence="a b", dtype="bfloat16")
    with pytest.raises(ConfigError, match="bfloat16 matmuls run on the CPU"):
        AttentionConfig(sentence="a b", model="smollm2-135m", dtype="bfloat16", device="cuda")


def test_interventions_attribution_and_circuits_refuse_bfloat16_in_one_line(mixed):
    from attn_gui.engine.analysis.attribution.trace import trace
    from attn_gui.engine.analysis.circuits import prepare
    from attn_gui.engine.analysis.interventions import head_effects

    path, _ = mixed
    cfg = AttentionConfig(sentence=SENTENCE, model=path, dtype="bfloat16")
    for run in (lambda: next(head_effects(cfg)), lambda: trace(cfg), lambda: prepare(cfg)):
        with pytest.raises(ConfigError, match=r"^interventions and attribution compute in float32 or float64; "
                                              r"bfloat16 matmuls are for the maps and the next tokens"):
            run()
