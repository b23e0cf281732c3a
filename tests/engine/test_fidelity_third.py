"""Numbers that were wrong without a word (issue 57), each against transformers or TransformerLens: Gemma 2's logit
lens through its final soft-cap, the defaults of fields a config.json leaves out, a registered model checked
against its own forward, a bridge read with TransformerLens' own tokens, a folder rewritten in place."""

import pytest
import torch
import transformers
from tiny_decoders import SENTENCE, WORDS  # tests/
from transformers_peer import alphas_equal_transformers, top5_equals_transformers, word_tokenizer  # tests/

from attn_gui.engine import AttentionConfig
from attn_gui.engine.analysis.attribution.logit import logit_lens
from attn_gui.engine.specs.defaults import DEFAULTS, LEFT_OUT, ROPE
from attn_gui.engine.specs.encoder_config import FIELDS
from attn_gui.engine.specs.families import FAMILIES


SMALL = dict(vocab_size=len(WORDS), hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def _build(kind: str, folder, **fields) -> transformers.PreTrainedModel:
    """A tiny random ``kind`` model saved in ``folder`` with a word-level tokenizer; ``fields`` over ``SMALL``
    (a value None: the field left out of config.json). Weights of std 0.2 and random gains, so a scale shows."""
    torch.manual_seed(0)
    given = {k: v for k, v in {**SMALL, **fields}.items() if v is not None}
    config = transformers.AutoConfig.for_model(kind, **given)
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for w in hf.state_dict().values():
            w.normal_(1.0 if w.ndim == 1 else 0.0, 0.3 if w.ndim == 1 else 0.2)
    hf.save_pretrained(folder)
    word_tokenizer(WORDS).save(str(folder / "tokenizer.json"))
    return hf


def _ids(sentence: str = SENTENCE) -> torch.Tensor:
    return torch.tensor([WORDS.index(w) for w in sentence.split()])


def test_gemma2_logit_lens_last_row_is_transformers_softcapped_p(tmp_path):
    """Before: the lens read softmax(W_U norm(x)) without the cap, 0.97 off p with a cap of 3; now its last row is
    softmax of transformers' own (soft-capped) logits."""
    hf = _build("gemma2", tmp_path, head_dim=8, final_logit_softcapping=3.0, query_pre_attn_scalar=8)
    lens = logit_lens(AttentionConfig(sentence=SENTENCE, model=str(tmp_path)), k=5)
    with torch.no_grad():
        theirs = torch.softmax(hf(_ids()[None]).logits[0].double(), -1)  # (n, V)
    top = theirs.topk(5, -1)
    assert torch.allclose(lens.probs[-1], top.values, atol=1e-5)
    assert lens.tokens[-1] == [[WORDS[i] for i in row] for row in top.indices.tolist()]


def _config_class(kind: str):
    return type(transformers.AutoConfig.for_model(kind))


def _theirs(config, field: str):
    """``config``'s value of ``field``; transformers 5 keeps rope_theta in rope_parameters (Gemma 3's by layer type)."""
    rope = getattr(config, "rope_parameters", None) or {}
    if field == "rope_theta" and not hasattr(config, field):
        return (rope.get("full_attention") or rope)["rope_theta"]
    if field == "rope_local_base_freq" and not hasattr(config, field):
        return rope["sliding_attention"]["rope_theta"]
    return getattr(config, field)


@pytest.mark.parametrize("kind", sorted(FAMILIES))
def test_every_default_is_the_config_class_default(kind):
    """Each entry of ``defaults.DEFAULTS`` is the family's transformers config class default, every field the family
    reads is in the table or in ``LEFT_OUT`` with its reason, and the family's activation is the class's."""
    family, table = FAMILIES[kind], DEFAULTS[kind]
    config = _config_class(kind)()
    for field, value in table.items():
        assert _theirs(config, field) == value, field
    reads = set(FIELDS[kind]["honoured"] if kind in FIELDS else family.reads)  # DeBERTa's, ModernBERT's: FIELDS
    for field in sorted(reads - set(table)):
        assert field in LEFT_OUT, field
    if "rope_theta" in reads and "rope_theta" not in table:  # hf.spec.rope's default base
        assert _theirs(config, "rope_theta") == ROPE
    act = next((getattr(config, f) for f in ("hidden_act", "hidden_activation", "activation_function", "activation")
                if hasattr(config, f)), None)
    assert act == family.act


ABSENT = [  # (family, fields of the tiny model, the fields config.json then leaves out)
    ("gemma2", dict(head_dim=8, query_pre_attn_scalar=8), ("attn_logit_softcapping", "final_logit_softcapping")),
    ("gemma2", dict(head_dim=8, attn_logit_softcapping=None), ("query_pre_attn_scalar",)),
    ("gemma2", dict(head_dim=256, query_pre_attn_scalar=8), ("head_dim",)),  # refused before: W_q is (1024, 32)
    ("gemma3_text", dict(head_dim=8), ("query_pre_attn_scalar",)),
    ("qwen3", dict(head_dim=128), ("head_dim",)),
    ("olmo2", dict(rms_norm_eps=1e-5), ("rms_norm_eps",)),
    ("phi3", dict(rms_norm_eps=1e-5), ("rms_norm_eps",)),
    ("gpt2", dict(n_embd=32, n_head=4, n_layer=2, n_positions=64), ("layer_norm_epsilon",)),
]


@pytest.mark.parametrize("kind, fields, left_out", ABSENT, ids=[f"{k}-{'+'.join(d)}" for k, _, d in ABSENT])
def test_a_field_left_out_reads_as_transformers_reads_it(tmp_path, kind, fields, left_out):
    """config.json without the field: α of every layer and the next-token top 5 equal transformers' on the same
    folder. Before, the engine read its own default (no soft-caps, √d_k, eps 1e-6, d / h)."""
    import json

    llama_sizes = {k: None for k in SMALL if k not in ("vocab_size", "bos_token_id", "eos_token_id", "pad_token_id")}
    _build(kind, tmp_path, **(llama_sizes if kind == "gpt2" else {}), **fields)  # GPT-2 names its sizes its own way
    config = json.loads((tmp_path / "config.json").read_text())
    for field in left_out:
        config.pop(field, None)
    (tmp_path / "config.json").write_text(json.dumps(config))
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    _, cfg, _ = alphas_equal_transformers(str(tmp_path), hf, SENTENCE, layers=2)
    with torch.no_grad():
        logits = hf(_ids()[None]).logits[0, -1]
    top5_equals_transformers(cfg, logits, WORDS)


def test_register_refuses_a_model_whose_config_was_edited_after_it_was_built():
    """Before, register() read the edited rope_theta and showed α 0.93 and logits 7.9 from transformers' own
    forward without a word; now the engine's logits are checked against the model's own forward (one line)."""
    import attn_gui
    from transformers_peer import tiny_qwen2

    from attn_gui.engine import ConfigError

    model = tiny_qwen2()
    attn_gui.register(model, word_tokenizer(), name="as-built")  # the check passes on the model as built
    model.config.rope_parameters["rope_theta"] = 50.0  # the rotary embedding was computed at 10000 already
    with pytest.raises(ConfigError, match="^edited: the engine's logits differ from the model's own forward by "):
        attn_gui.register(model, word_tokenizer(), name="edited")
    assert "edited" not in attn_gui.engine.specs.catalog.REGISTERED


def test_a_bridge_is_read_with_its_own_tokens(tmp_path):
    """TransformerLens runs GPT-NeoX without BOS (cfg.default_prepend_bos False) though its tokenizer adds one.
    Before, the engine read <s> the cat ... where bridge.to_tokens reads the cat ...: every α one token off, and
    the registration check fed both the same ids; now the engine reads a text as to_tokens does and α equals
    run_with_cache(text)'s pattern."""
    import attn_gui
    from lens_bridges import boot

    from attn_gui.engine import compute
    from attn_gui.engine.model.registry import source

    config = transformers.GPTNeoXConfig(vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=4, intermediate_size=48, max_position_embeddings=64,
                                        bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    hf = transformers.GPTNeoXForCausalLM(config).eval()
    with torch.no_grad():
        for w in hf.state_dict().values():
            w.normal_(1.0 if w.ndim == 1 else 0.0, 0.3 if w.ndim == 1 else 0.2)
    hf.save_pretrained(tmp_path)
    word_tokenizer(WORDS).save(str(tmp_path / "tokenizer.json"))
    transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"), unk_token="<unk>",
                                        bos_token="<s>", eos_token="</s>").save_pretrained(tmp_path)
    bridge = boot(str(tmp_path))
    assert not bridge.cfg.default_prepend_bos and bridge.tokenizer(SENTENCE)["input_ids"][0] == 1  # a BOS to strip
    attn_gui.register(bridge, name="neox-bridge")
    theirs = bridge.to_tokens(SENTENCE)[0].tolist()
    assert list(source("neox-bridge").tokenize(SENTENCE).token_ids) == theirs == _ids().tolist()
    logits, cache = bridge.run_with_cache(SENTENCE)
    for layer in range(2):
        ours = compute(AttentionConfig(sentence=SENTENCE, model="neox-bridge", layer=layer))
        assert torch.allclose(ours.weights, cache[f"blocks.{layer}.attn.hook_pattern"][0], atol=1e-5, rtol=0)
    top = torch.softmax(logits[0, -1].double(), -1).topk(5)
    assert [t for t, _ in ours.next_tokens] == [WORDS[i] for i in top.indices.tolist()]


def test_a_folder_rewritten_in_place_is_read_again(tmp_path):
    """Before, the spec was cached by path and the loaded model by name: after new weights, and after an edited
    config.json, the window kept the first reading (α up to 0.98 off). Now both equal transformers on the new
    files."""
    import json

    from attn_gui.engine import compute

    _build("llama", tmp_path)
    first = compute(AttentionConfig(sentence=SENTENCE, model=str(tmp_path)))
    hf = _build("llama", tmp_path, hidden_act="gelu")  # another config.json, and other weights (scaled below)
    with torch.no_grad():
        for w in hf.state_dict().values():
            w.mul_(1.5)
    hf.save_pretrained(tmp_path)
    alphas_equal_transformers(str(tmp_path), hf, SENTENCE, layers=2)
    assert not torch.allclose(first.weights, compute(AttentionConfig(sentence=SENTENCE, model=str(tmp_path))).weights,
                              atol=1e-3)
    config = json.loads((tmp_path / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": 50.0}
    (tmp_path / "config.json").write_text(json.dumps(config))
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    _, cfg, _ = alphas_equal_transformers(str(tmp_path), hf, SENTENCE, layers=2)
    with torch.no_grad():
        top5_equals_transformers(cfg, hf(_ids()[None]).logits[0, -1], WORDS)


def test_register_says_in_one_line_when_the_models_own_forward_fails():
    """The check runs the object's forward: one that raises (transformers 5's Qwen2 with config.return_dict False
    unpacks a tuple as an output) is one ConfigError, no traceback from inside transformers."""
    import attn_gui
    from transformers_peer import tiny_qwen2

    from attn_gui.engine import ConfigError

    model = tiny_qwen2()
    model.config.return_dict = False
    with pytest.raises(ConfigError, match=r"^tuple: the model's own forward fails on a few tokens \(AttributeError"):
        attn_gui.register(model, word_tokenizer(), name="tuple")


def test_gpt_neox_without_attention_biases_equals_transformers(tmp_path):
    """GPT-NeoX with attention_bias false has no Q/K/V or output biases: before, refused in one line (the weights
    lack q_proj.bias) though transformers runs it; now α and the next-token top 5 equal transformers'. One that
    says true and lacks them is still refused."""
    import json

    from attn_gui.engine import ConfigError, model_spec
    from attn_gui.engine.model.decoder.source import load_model

    hf = _build("gpt_neox", tmp_path / "plain", attention_bias=False, num_key_value_heads=None)
    assert not any("query_key_value.bias" in k for k in hf.state_dict())
    _, cfg, _ = alphas_equal_transformers(str(tmp_path / "plain"), hf, SENTENCE, layers=2)
    with torch.no_grad():
        top5_equals_transformers(cfg, hf(_ids()[None]).logits[0, -1], WORDS)
    config = json.loads((tmp_path / "plain" / "config.json").read_text())
    config.pop("attention_bias")  # GPTNeoXConfig's default: true
    (tmp_path / "plain" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="config.json has attention_bias = true, the weights lack"):
        load_model(str(tmp_path / "plain"))
    assert model_spec(str(tmp_path / "plain")).layers == 2
