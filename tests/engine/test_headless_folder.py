"""A head-less decoder folder: weights saved from ``AutoModel`` (``LlamaModel``, ``Qwen2Model``: tensor
names without the ``model.`` prefix and no lm_head, as many embedding models built on Qwen2 and Llama
ship). It opens with every layer's alpha equal to transformers' on the same folder and no next tokens;
generating and interventions are refused naming the missing head, and a folder without W_q names it."""

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from attn_gui.engine import AttentionConfig, ConfigError, compute, model_spec
from attn_gui.engine.run.decoding import generate
from attn_gui.engine.analysis.interventions import ablate
from tests.engine.test_model_folders import SENTENCE, WORDS, _tokenizer
from tests.transformers_peer import alphas_equal_transformers


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def headless(request, tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(request.param, hidden_size=32, intermediate_size=48,
                                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                               vocab_size=len(WORDS), max_position_embeddings=128)
    hf = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():  # random, not zero or one, biases and norm gains: they must be read
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.normal_(0, 0.3).add_(1.0 if "norm" in name else 0.0)
    path = tmp_path_factory.mktemp(f"{request.param}-headless")
    hf.save_pretrained(path)
    _tokenizer(path)
    names = load_file(str(path / "model.safetensors"))
    assert "layers.0.self_attn.q_proj.weight" in names and not any(n.startswith(("model.", "lm_head")) for n in names)
    return str(path), hf


def test_a_headless_folder_shows_transformers_alphas_and_no_next_tokens(headless):
    path, hf = headless
    _, cfg, results = alphas_equal_transformers(path, hf, SENTENCE)
    assert all(r.next_tokens is None for r in results)
    assert model_spec(path).causal
    with pytest.raises(ConfigError, match="has no language-model head"):
        generate(cfg, 1)
    with pytest.raises(ConfigError, match="no language-model head"):
        ablate(cfg, [(0, 0)])


def test_a_folder_without_w_q_names_the_missing_tensor(headless, tmp_path):
    import shutil

    path, _ = headless
    broken = tmp_path / "broken"
    shutil.copytree(path, broken)
    tensors = load_file(str(broken / "model.safetensors"))
    save_file({n: t for n, t in tensors.items() if "q_proj" not in n}, str(broken / "model.safetensors"))
    with pytest.raises(ConfigError, match=r"the weights have no model\.layers\.0\.self_attn\.q_proj\.weight"):
        compute(AttentionConfig(sentence=SENTENCE, model=str(broken)))
