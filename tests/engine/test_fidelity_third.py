"""Numbers that were wrong without a word (issue 57), each against transformers or TransformerLens: Gemma 2's logit
lens through its final soft-cap, the defaults of fields a config.json leaves out, a registered model checked
against its own forward, a bridge read with TransformerLens' own tokens, a folder rewritten in place."""

import torch
import transformers
from tiny_decoders import SENTENCE, WORDS  # tests/
from transformers_peer import word_tokenizer  # tests/

from attn_gui.engine import AttentionConfig
from attn_gui.engine.analysis.attribution.logit import logit_lens


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
