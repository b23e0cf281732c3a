"""The check most model tests start with: every layer's α equals transformers' on the same model."""

import torch

from attn_gui.engine import AttentionConfig, compute, source


def alphas_equal_transformers(path: str, hf, sentence: str, layers: int = 2):
    """Every layer's α of the model at ``path`` on ``sentence`` equals ``hf``'s eager attentions
    (1e-5); returns transformers' output, the config and each layer's result for further checks."""
    ids = torch.tensor(source(path).tokenize(sentence).token_ids)
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True)
    cfg = AttentionConfig(sentence=sentence, model=path)
    results = [compute(cfg.replace(layer=layer)) for layer in range(layers)]
    for layer, r in enumerate(results):
        assert torch.allclose(r.weights, out.attentions[layer][0], atol=1e-5, rtol=0), layer
    return out, cfg, results


WORDS = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(61)] + ["the", "cat", "sat", "on", "a", "mat", "and",
                                                                   "dog", "ran"]
SENTENCE = "the cat sat on a mat and the dog ran"


def word_tokenizer(folder) -> None:
    """A WordLevel tokenizer.json of ``WORDS`` in ``folder`` (whitespace-split, adds nothing)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
