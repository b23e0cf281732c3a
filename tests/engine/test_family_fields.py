"""Honour or refuse, judged against transformers (issue 44).

A config.json field is refused only where transformers' own modeling code for the family reads it and attn-gui
does not compute it (``Family.refuses``); a field transformers never reads changes none of its numbers and is
inert here too. Both lists are read from transformers' source, so a field it starts reading fails here. Then the
three cases where the numbers equalled nothing transformers computes: RoBERTa's pad token inside the text,
ModernBERT's ``sliding_window`` and Gemma 3's ``attn_logit_softcapping``.
"""

import importlib
import inspect
import json
import re

import pytest
import torch
import transformers

from attn_gui.engine import AttentionConfig, compute, model_spec
from attn_gui.engine.model.registry import source
from attn_gui.engine.model.plan import plan
from attn_gui.engine.specs.encoder_config import FIELDS as ENCODER_FIELDS
from attn_gui.engine.specs.families import FAMILIES, INERT

from transformers_peer import alphas_equal_transformers, word_tokenizer, WORDS  # (tests/)

MODULES = {"gemma3_text": "gemma3", "deberta-v2": "deberta_v2"}
# what transformers' modeling code reads that is no config field of a saved model: the attention implementation
# chosen at load, the task heads' label count, a composite model's sub-configs (Gemma 3 with vision)
NOT_FIELDS = {"_attn_implementation", "num_labels", "get_text_config", "text_config", "vision_config",
              "image_token_id", "mm_tokens_per_image"}


def transformers_reads(kind: str) -> set[str]:
    """Every config field transformers' modeling code for ``kind`` reads, and its config's own fields."""
    module = MODULES.get(kind, kind)
    code = inspect.getsource(importlib.import_module(f"transformers.models.{module}.modeling_{module}"))
    read = set(re.findall(r"config\.(\w+)", code)) | set(re.findall(r"getattr\(config, \"(\w+)\"", code))
    config = transformers.AutoConfig.for_model(kind)
    fields = set(config.to_dict())
    if "rope_parameters" in fields:  # transformers 5's configs read a legacy rope_scaling into rope_parameters
        fields.add("rope_scaling")
    aliases = type(config).attribute_map  # GPT-2's hidden_size is its n_embd
    return {aliases.get(name, name) for name in read | fields} - NOT_FIELDS


@pytest.mark.parametrize("kind", sorted(FAMILIES))
def test_every_field_transformers_reads_is_honoured_inert_or_refused(kind):
    family = FAMILIES[kind]
    read = transformers_reads(kind)
    if kind in ENCODER_FIELDS:  # DeBERTa-v2, ModernBERT: declared field by field in encoder_config
        declared = {f for fields in ENCODER_FIELDS[kind].values() for f in fields}
        refuses = set(ENCODER_FIELDS[kind]["refused"])
    else:
        declared = {*family.reads, *INERT, *dict(family.fixed), *dict(family.names).values(), *family.refuses}
        refuses = set(family.refuses)
    assert read - declared == set(), "a field transformers reads that attn-gui neither computes nor refuses"
    assert refuses <= read, "a refused field transformers never reads: it changes no number, so it is inert"


def _encoder_folder(tmp_path, kind: str, specials: list[str], **sizes):
    """A tiny random ``kind`` encoder saved by transformers (biases and norms random) with a WordLevel tokenizer."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    vocab = specials + WORDS[3:]
    config = transformers.AutoConfig.for_model(kind, vocab_size=len(vocab), **sizes)
    hf = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():  # transformers starts biases at 0 and norm gains at 1, which would hide a dropped one
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name or "norm" in name:
                p.copy_(torch.randn_like(p) * 0.5 + (1.0 if name.endswith("weight") else 0.0))
    path = tmp_path / kind
    hf.save_pretrained(path)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token=specials[-1]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([AddedToken(s, special=True) for s in specials])
    tok.save(str(path / "tokenizer.json"))
    return path, hf


MODERNBERT_IDS = dict(pad_token_id=0, cls_token_id=1, sep_token_id=2, bos_token_id=1, eos_token_id=2)  # in the vocab


def _with_fields(path, **fields):
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(cfg | fields))


def test_a_field_transformers_never_reads_is_inert(tmp_path):
    """distilbert-base-*'s published ``tie_weights_`` and ModernBERT's ``layer_norm_eps``, ``position_embedding_type``,
    ``reference_compile`` (published) and ``mask_token_id`` (transformers 5 writes it) open and equal transformers."""
    path, hf = _encoder_folder(tmp_path, "distilbert", ["[PAD]", "[CLS]", "[SEP]", "[UNK]"], dim=32, n_layers=2,
                               n_heads=4, hidden_dim=48)
    _with_fields(path, tie_weights_=True)
    alphas_equal_transformers(str(path), hf, "the cat sat on a mat")
    path, hf = _encoder_folder(tmp_path, "modernbert", ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"],
                               hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=48,
                               local_attention=4, global_attn_every_n_layers=2, max_position_embeddings=64,
                               **MODERNBERT_IDS)
    _with_fields(path, layer_norm_eps=1e-5, position_embedding_type="absolute", reference_compile=None,
                 mask_token_id=3)
    alphas_equal_transformers(str(path), hf, "the cat sat on a mat and the dog ran", layers=3)


def test_modernbert_sliding_window_sets_its_local_attention(tmp_path):
    """transformers' ModernBertConfig reads ``sliding_window`` as half the local window: local_attention = 2 x it,
    over the config's own local_attention."""
    path, hf = _encoder_folder(tmp_path, "modernbert", ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"],
                               hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
                               local_attention=64, global_attn_every_n_layers=2, max_position_embeddings=64,
                               **MODERNBERT_IDS)
    _with_fields(path, sliding_window=1)  # local_attention 2: each token sees its neighbours only
    hf = transformers.AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    assert hf.config.local_attention == 2  # the reference's own reading
    out, _, results = alphas_equal_transformers(str(path), hf, "the cat sat on a mat and the dog ran")
    local = results[1].weights  # layer 2 of 2 is local (every second layer global)
    assert (local[:, 0, 2:] == 0).all() and (local[:, 0, :2] > 0).all()


def test_roberta_numbers_positions_as_transformers_with_its_pad_token_inside(tmp_path):
    """A pad token typed inside the text takes RoBERTa's padding position and is not counted: the tokens after it
    keep the positions they would have without it (transformers' create_position_ids_from_input_ids)."""
    path, hf = _encoder_folder(tmp_path, "roberta", ["<s>", "<pad>", "</s>", "<unk>"], pad_token_id=1,
                               hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
                               max_position_embeddings=40)
    sentence = "the cat <pad> sat on <pad> a mat"
    ids = source(str(path)).tokenize(sentence).token_ids
    assert ids.count(1) == 2  # the pad token is in the text
    alphas_equal_transformers(str(path), hf, sentence)


def test_gemma3_reads_its_soft_cap_and_does_not_apply_it(tmp_path):
    """transformers' Gemma3Attention passes no softcap to its attention, whatever attn_logit_softcapping says: the
    maps equal it uncapped, and the window says the field is not applied."""
    torch.manual_seed(0)
    words = WORDS
    config = transformers.Gemma3TextConfig(vocab_size=len(words), hidden_size=32, intermediate_size=48,
                                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                           head_dim=8, attn_logit_softcapping=0.5, sliding_window=4,
                                           max_position_embeddings=64, query_pre_attn_scalar=8)
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.copy_(torch.randn_like(p) * 0.5)
    path = tmp_path / "gemma3"
    hf.save_pretrained(path)
    word_tokenizer(words).save(str(path / "tokenizer.json"))
    assert json.loads((path / "config.json").read_text())["attn_logit_softcapping"] == 0.5
    alphas_equal_transformers(str(path), hf, "the cat sat on a mat and the dog ran")
    spec = model_spec(str(path))
    assert spec.softcap is None and plan(AttentionConfig(model=str(path))).shown.softcap is None
    assert any("attn_logit_softcapping = 0.5 is not applied" in note for note in spec.about)
    r = compute(AttentionConfig(model=str(path), sentence="the cat sat"))
    assert r.capped is None
