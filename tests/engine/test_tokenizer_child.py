"""A decoder's tokenizer is built and run in a child process (the interpreter lock stays free while it
builds), and gives what transformers' tokenizer of the same tokenizer.json gives: ids, text back,
vocabulary, special tokens; a broken file is one line; where no child can run it is built here alike.
"""

import gc
import sys

import pytest
import torch

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError
from attn_gui.engine.readers import checks
from attn_gui.engine.text.tokenizer_child import Child

import transformers

TEXTS = ["The capital of France is Paris.", "héllo wörld 🙂  two  spaces\nand a line", "<|endoftext|>after", ""]


@pytest.fixture(scope="module")
def bpe_file(tmp_path_factory):
    """A byte-level BPE tokenizer.json trained on a few sentences, with a special token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["the capital of france is paris", "a cat sat on the mat"] * 20, trainer)
    path = tmp_path_factory.mktemp("bpe") / "tokenizer.json"
    tok.save(str(path))
    return path


def _peer(path):
    return transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))


@pytest.mark.parametrize("given", ["path", "text"])
def test_the_child_tokenizes_as_transformers(bpe_file, given):
    child = Child(path=bpe_file) if given == "path" else Child(text=bpe_file.read_text())
    peer = _peer(bpe_file)
    for text in TEXTS:
        ids = peer(text, add_special_tokens=False)["input_ids"]
        assert child.encode(text, add_special_tokens=False).ids == ids
        assert child.encode(text, add_special_tokens=False).tokens == peer.convert_ids_to_tokens(ids)
        assert child.decode(ids, skip_special_tokens=False) == peer.decode(ids, skip_special_tokens=False)
        assert child.decode(ids, skip_special_tokens=True) == peer.decode(ids, skip_special_tokens=True)
    assert child.get_vocab(with_added_tokens=True) == peer.get_vocab()
    assert {i: (t.content, t.special) for i, t in child.get_added_tokens_decoder().items()} == {
        i: (t.content, t.special) for i, t in peer.added_tokens_decoder.items()}
    assert child.model.unk_token == peer.backend_tokenizer.model.unk_token
    assert child._proc.pid != __import__("os").getpid() and child._here is None  # built and run in the child
    child.close()
    assert child._proc.returncode is not None


@pytest.mark.parametrize("executable", ["/nonexistent/python", "/bin/false"])
def test_without_a_child_the_tokenizer_is_built_here_alike(bpe_file, monkeypatch, executable):
    # no interpreter to start (OSError), or a child that ends without answering: built in this process
    monkeypatch.setattr(sys, "executable", executable)
    child = Child(path=bpe_file)
    peer = _peer(bpe_file)
    assert child.encode(TEXTS[1], add_special_tokens=False).ids == peer(TEXTS[1], add_special_tokens=False)["input_ids"]
    assert child._here is not None and child.get_vocab() == peer.get_vocab()


def test_a_garbled_tokenizer_is_one_line(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}')
    with pytest.raises(ConfigError) as caught, checks.tokenizer_errors("x/tokenizer.json"):
        Child(path=bad).wait()
    assert "x/tokenizer.json is not a tokenizer" in str(caught.value) and "\n" not in str(caught.value)


def test_a_decoder_folder_tokenizes_in_a_child_that_ends_with_the_model(tmp_path):
    from tokenizers import Tokenizer

    from attn_gui.engine.model.decoder import source as decoder
    from attn_gui.engine.model.loaded import LOADED
    from transformers_peer import SENTENCE, word_tokenizer  # tests/

    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model("llama", hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                                               num_attention_heads=2, vocab_size=80)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path)
    word_tokenizer().save(str(tmp_path / "tokenizer.json"))
    path = str(tmp_path)
    plan(AttentionConfig(model=path))
    model = decoder.load_model(path)
    child = model.tokenizer
    assert isinstance(child, Child) and child._proc.poll() is None
    peer = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert list(decoder.model_tokenize(path, SENTENCE).token_ids) == peer.encode(SENTENCE).ids
    proc = child._proc
    del model, child
    LOADED.forget(path)
    decoder.tokenize_with.cache_clear()
    gc.collect()
    assert proc.wait(timeout=30) is not None  # the child read end of file and ended
