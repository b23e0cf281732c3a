"""Real published config.json files, their sizes shrunk and every other field kept, open and equal transformers.

Each file in ``tests/data/published_configs`` is a model's config.json as its authors published it (the README
there names where each copy was found). Here its sizes (width, layers, heads, K/V heads, head size, feed-forward
width, the sliding window and the vocabulary of a small word-level tokenizer) shrink; every other field stays as
published, and the special-token ids that fall outside the small vocabulary point at its own special tokens.
transformers builds the model class the file names from that file (random weights, its biases and norm gains
random too: its 0 and 1 would hide a dropped one), saves it, and the folder gets the shrunk published file back as
its config.json. attn-gui opens the folder by path: every layer's alpha equals transformers' eager
``output_attentions`` (1e-5) and a decoder's next-token logits equal transformers' (1e-4).
"""

import json
from pathlib import Path

import pytest
import torch
import transformers

from attn_gui.engine import AttentionConfig, compute
from attn_gui.engine.model.registry import source
from transformers_peer import SENTENCE, WORDS, word_tokenizer  # (tests/)

DATA = Path(__file__).parents[1] / "data" / "published_configs"
D, FF, LAYERS, HEADS = 32, 48, 2, 4  # the shrunk width, feed-forward width, depth and heads
WINDOW = 4  # a sliding window shorter than the sentence, so that it masks something

# Each family's sizes as they are named in its config.json. A head size is given where the file gives one apart
# from width / heads (Gemma: 256 against 3584 / 16): it stays apart (16 against 32 / 4).
SIZES = {
    "llama3_2": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                     num_key_value_heads=2, head_dim=D // HEADS),
    "llama2": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                   num_key_value_heads=HEADS),
    "mistral": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                    num_key_value_heads=2, sliding_window=WINDOW),
    "qwen2_5": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                    num_key_value_heads=2, sliding_window=WINDOW),  # use_sliding_window stays false
    "qwen3": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                  num_key_value_heads=2, head_dim=D // HEADS),
    # Gemma 2 alternates sliding and full layers (layer 0 sliding): two layers hold one of each
    "gemma2": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                   num_key_value_heads=2, head_dim=16, sliding_window=WINDOW),
    # Gemma 3's sliding_window_pattern 6: layers 0-4 sliding, layer 5 full, so six layers hold both kinds
    "gemma3": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=6, num_attention_heads=HEADS,
                   num_key_value_heads=1, head_dim=16, sliding_window=WINDOW),
    "phi3": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                 num_key_value_heads=HEADS, sliding_window=WINDOW),
    # longrope's short_factor and long_factor hold head size / 2 = 48 entries: the head size stays 96
    "phi3_128k": dict(hidden_size=HEADS * 96, intermediate_size=FF, num_hidden_layers=LAYERS,
                      num_attention_heads=HEADS, num_key_value_heads=HEADS),
    "olmo2": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                  num_key_value_heads=HEADS),
    "pythia": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS),
    "gpt2": dict(n_embd=D, n_layer=LAYERS, n_head=HEADS),
    "bert": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS),
    "roberta": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS),
    "distilbert": dict(dim=D, hidden_dim=FF, n_layers=LAYERS, n_heads=HEADS),
    "deberta_v3": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                       pooler_hidden_size=D),
    # every third layer global (layer 0), the others local: three layers hold both kinds
    "modernbert": dict(hidden_size=D, intermediate_size=FF, num_hidden_layers=3, num_attention_heads=HEADS,
                       local_attention=WINDOW),
}
# An encoder's special tokens, first in its vocabulary in its own order, and the two its tokenizer puts around a text
ENCODER_SPECIALS = {
    "bert": (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], "[CLS]", "[SEP]"),
    "distilbert": (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], "[CLS]", "[SEP]"),
    "roberta": (["<s>", "<pad>", "</s>", "<unk>", "<mask>"], "<s>", "</s>"),
    "deberta_v3": (["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"], "[CLS]", "[SEP]"),
    "modernbert": (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], "[CLS]", "[SEP]"),
}
# Which of the small vocabulary's tokens a special-token id outside it becomes
TOKEN_ID_FIELDS = {"bos_token_id": ("<s>", "[CLS]"), "eos_token_id": ("</s>", "[SEP]"),
                   "pad_token_id": ("<unk>", "[PAD]"), "cls_token_id": ("<s>", "[CLS]"),
                   "sep_token_id": ("</s>", "[SEP]"), "mask_token_id": ("<unk>", "[MASK]")}
FAMILIES = sorted(p.stem for p in DATA.glob("*.json"))


def _vocabulary(family: str) -> list[str]:
    if family not in ENCODER_SPECIALS:
        return WORDS
    specials = ENCODER_SPECIALS[family][0]
    return specials + [w for w in WORDS if not w.startswith("<")]


def _tokenizer(family: str, vocab: list[str]):
    """A word-level tokenizer of ``vocab``; an encoder's adds its first and last special tokens around a text."""
    from tokenizers import AddedToken, processors

    tok = word_tokenizer(vocab)
    if family in ENCODER_SPECIALS:
        specials, first, last = ENCODER_SPECIALS[family]
        tok.add_special_tokens([AddedToken(s, special=True) for s in specials])
        tok.post_processor = processors.TemplateProcessing(
            single=f"{first} $A {last}", special_tokens=[(first, vocab.index(first)), (last, vocab.index(last))])
    return tok


def shrunk(family: str, vocab: list[str]) -> dict:
    """The published config.json of ``family`` with its sizes shrunk; every other field as published."""
    published = json.loads((DATA / f"{family}.json").read_text())
    cfg = {**published, **SIZES[family], "vocab_size": len(vocab)}
    encoder = family in ENCODER_SPECIALS
    for field, tokens in TOKEN_ID_FIELDS.items():
        value = cfg.get(field)
        ids = value if isinstance(value, list) else [value]
        if any(isinstance(i, int) and i >= len(vocab) for i in ids):  # the small vocabulary has no such id
            cfg[field] = vocab.index(tokens[encoder])
    return cfg


def _randomize(model: torch.nn.Module) -> None:
    """Every weight random, norm gains about 1 and biases random (not transformers' 0 and 1); large enough that
    the attention is far from uniform, so that a wrong scale or soft-cap shows."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen) * 0.3
            gain = "norm" in name.lower() and name.endswith("weight") and p.dim() == 1
            p.copy_(noise + (1.0 if gain else 0.0))


@pytest.fixture(scope="module", params=FAMILIES)
def published(request, tmp_path_factory):
    """(family, folder, transformers' model of it, layers, decoder?) for one published config.json."""
    family = request.param
    vocab = _vocabulary(family)
    folder = tmp_path_factory.mktemp(family)
    cfg = shrunk(family, vocab)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    config = transformers.AutoConfig.from_pretrained(folder)
    names = cfg.get("architectures") or []
    cls = getattr(transformers, names[0]) if names else transformers.AutoModel
    torch.manual_seed(0)
    model = cls._from_config(config, attn_implementation="eager", dtype=torch.float32)
    _randomize(model)
    model.save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))  # the published fields, not transformers' re-save
    _tokenizer(family, vocab).save(str(folder / "tokenizer.json"))
    hf = cls.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    decoder = family not in ENCODER_SPECIALS
    return family, str(folder), hf, config.num_hidden_layers, decoder


def test_every_layer_and_the_next_token_equal_transformers(published):
    family, folder, hf, layers, decoder = published
    ids = torch.tensor(source(folder).tokenize(SENTENCE).token_ids)
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True)
    cfg = AttentionConfig(model=folder, sentence=SENTENCE)
    for layer in range(layers):
        got = compute(cfg.replace(layer=layer)).weights
        want = out.attentions[layer][0]
        assert got.shape == want.shape, (family, layer, tuple(got.shape), tuple(want.shape))
        diff = (got - want).abs().max().item()
        assert diff <= 1e-5, f"{family} layer {layer}: alpha off by {diff:.3g}"
    if decoder:
        logits = source(folder).forward(ids, "cpu", torch.float32).logits
        diff = (logits - out.logits[0, -1]).abs().max().item()
        assert diff <= 1e-4, f"{family}: next-token logits off by {diff:.3g}"
