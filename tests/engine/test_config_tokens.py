import subprocess
import sys

import pytest

from attn_gui.engine.model.plan import plan
from attn_gui.engine import (
    AttentionConfig,
    ConfigError,
    DeviceError,
    TooLargeError,
    UserError,
    check_tokens,
    estimate_bytes,
    tokenize,
)
from attn_gui.engine import compute


def test_word_tokenizer_strips_punctuation_and_keeps_case():
    t = tokenize("Life is short, eat dessert first")
    assert t.tokens == ("Life", "is", "short", "eat", "dessert", "first")
    assert dict(zip(t.vocab, range(6), strict=False)) == {"Life": 0, "dessert": 1, "eat": 2, "first": 3, "is": 4,
                                                         "short": 5}
    assert tokenize('"Hello," she said... (didn\'t she?)').tokens == ("Hello", "she", "said", "didn't", "she")


def test_word_tokenizer_handles_unicode_emoji_and_controls():
    assert tokenize("Ünïcödé 日本語 слово 🙂 !!").tokens == ("Ünïcödé", "日本語", "слово", "🙂")
    assert tokenize("a\x00b\tc\u200bd\x1b").tokens == ("a", "b", "c", "d")
    assert tokenize("... !!! ,").tokens == ()


def test_char_tokenizer():
    t = tokenize("ab  ba", "char")
    assert t.tokens == ("a", "b", " ", "b", "a")
    assert t.vocab == (" ", "a", "b")


@pytest.mark.parametrize("changes,message", [
    ({"d_model": 0}, "d_model must be between 1"),
    ({"d_k": -3}, "d_k must be between 1"),
    ({"heads": 10**6}, "heads must be between"),
    ({"d_v": 2.5}, "d_v must be a whole number"),
    ({"d_model": True}, "d_model must be a whole number"),
    ({"temperature": 0}, "temperature must be between 0.01 and 100; got 0"),
    ({"temperature": -1.0}, "temperature must be between 0.01 and 100"),
    ({"temperature": float("nan")}, "temperature must be a number between 0.01 and 100"),
    ({"temperature": float("inf")}, "temperature must be a number between 0.01 and 100"),
    ({"layout": "diagonal"}, "layout must be one of row, column"),
    ({"similarity": "l2"}, "similarity must be one of dot, cosine"),
    ({"device": "tpu"}, "device must be cpu, cuda, cuda:N or mps"),
    ({"device": "mps", "dtype": "float64"}, "float64 is not supported on MPS"),
    ({"causal": "yes"}, "causal must be true or false"),
    ({"seed": -1}, "seed must be between 0"),
])
def test_bad_values_raise_a_readable_config_error(changes, message):
    with pytest.raises(ConfigError, match=message):
        plan(AttentionConfig(**changes))


@pytest.mark.parametrize("sentence", ["", "?!", "  \t "])
def test_a_sentence_without_tokens_is_refused_by_the_token_check_and_compute(sentence):
    cfg = AttentionConfig(sentence=sentence)  # plain values: valid; the tokens are checked later
    with pytest.raises(ConfigError, match="the sentence has no tokens: type at least one word"):
        check_tokens(cfg)
    with pytest.raises(ConfigError, match="no tokens"):
        compute(cfg)


def test_config_round_trips_through_a_dict():
    cfg = AttentionConfig(heads=2, causal=True, weight_seed=7, temperature=0.5)
    assert AttentionConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown config field"):
        AttentionConfig.from_dict({**cfg.to_dict(), "evil": 1})
    with pytest.raises(ValueError, match="mapping"):
        AttentionConfig.from_dict([1, 2])


def test_one_token_and_causal_one_token():
    r = compute(AttentionConfig(sentence="hello", causal=True))
    assert r.weights.tolist() == [[[1.0]]]


def test_memory_is_estimated_before_allocating():
    huge = AttentionConfig(sentence=" ".join(["w"] * 8000), heads=128)
    assert estimate_bytes(huge) > 10**11
    with pytest.raises(TooLargeError, match="needs about .* free"):
        compute(huge)


def test_absent_device_is_a_device_error():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(DeviceError, match="CUDA is not available") as info:
        compute(AttentionConfig(device="cuda"))
    assert isinstance(info.value, UserError)


def test_engine_import_pulls_in_no_qt():
    code = ("import sys, attn_gui.engine; "
            "bad = [m for m in sys.modules if m.startswith(('PySide6', 'pyqtgraph', 'shiboken'))]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_heads_without_projections_are_refused():
    with pytest.raises(ConfigError, match="use 1 head"):
        AttentionConfig(projections=False, heads=2)


def test_token_limit_is_stated():
    cfg = AttentionConfig(sentence=" ".join(f"w{i}" for i in range(33000)))
    with pytest.raises(TooLargeError, match="T = 33,000 tokens is over the limit of 32,768 on cpu"):
        compute(cfg)


def test_results_do_not_share_memory_with_the_draw_cache():
    cfg = AttentionConfig(heads=2)
    compute(cfg).w_q.mul_(0)
    assert compute(cfg).w_q.abs().sum() > 0
