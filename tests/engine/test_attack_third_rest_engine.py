"""Issue 61, items 12 and 8, in the engine: a model cache edited and sealed again is checked against the model
file's header on every open (rebuilt, never used); census shards are range-checked when read; a registered model
edited through ``.data`` is seen, and hooks added to a bridge after ``register()`` are refused."""

import json
from pathlib import Path

import numpy as np
import torch
import pytest

from attn_gui.engine import model_spec
from attn_gui.engine.readers import cache
from attn_gui.engine.readers.gguf import load as gguf_load
from gguf_writing import byte_level_vocab, tiny, write_gguf  # tests/


def _reseal(path: Path, **facts) -> Path:
    manifest_path = cache.cache_root() / gguf_load.cache_name(path) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["meta"].update(facts)
    manifest["sha256"] = cache._sealed(manifest)  # sealed again with its own hash, as the attack did
    manifest_path.write_text(json.dumps(manifest))
    return manifest_path


@pytest.mark.parametrize("facts", [{"eps": 1.0}, {"add_bos": True}, {"eos_id": 1}, {"special_ids": []}])
def test_a_resealed_cache_is_checked_against_the_files_header(tmp_path, facts):
    import gguf

    hf = tiny("llama", len(byte_level_vocab()[0]), seed=3)
    path = Path(write_gguf(tmp_path / "resealed.gguf", hf, "llama", "byte", "Resealed"))
    spec = model_spec(str(path))
    first = gguf_load.load(spec, path)
    manifest_path = _reseal(path, **facts)
    again = gguf_load.load(spec, path)
    eps = float(gguf.GGUFReader(path).get_field("llama.attention.layer_norm_rms_epsilon").contents())
    assert eps == pytest.approx(hf.config.rms_norm_eps)  # the file says transformers' epsilon (1e-5)
    assert again["shape"].eps == first["shape"].eps == pytest.approx(eps)  # before: 1.0 with eps edited
    assert (again["add_bos"], again["eos_id"], again["special_ids"]) == (
        first["add_bos"], first["eos_id"], first["special_ids"])
    meta = json.loads(manifest_path.read_text())["meta"]  # the cache was rebuilt from the file
    assert all(meta[k] != v for k, v in facts.items())


def _nan_sums(s):
    s.sums = {k: np.where(np.arange(v.size).reshape(v.shape) == 0, np.nan, v) for k, v in s.sums.items()}


def _tokens(s):
    s.tokens = 10**30


def _counts(s):
    s.counts = {k: 10**30 for k in s.counts}


@pytest.mark.parametrize("edit, why", [(_nan_sums, "sums are not finite"),
                                       (_tokens, "its tokens are more than its passages can hold"),
                                       (_counts, "count more rows than its passages hold")])
def test_a_shard_out_of_range_is_computed_again_and_named(tmp_path, edit, why):
    """A shard whose numbers cannot be a census's (NaN sums, 10^30 tokens) is computed again, named in one line
    (before: read, its NaN and its counts in the census's means)."""
    import functools

    from attn_gui.engine.analysis.corpus.census import census, run_in_process
    from attn_gui.engine.analysis.corpus.outputs import read_heads
    from attn_gui.engine.analysis.corpus.read import read_corpus
    from attn_gui.engine.analysis.corpus.shards import Settings, ShardSums
    from corpus_data import llama_folder, sentences  # tests/

    run = functools.partial(run_in_process, threads=1)
    llama_folder(tmp_path / "model")
    texts = tmp_path / "corpus.txt"
    texts.write_text("\n".join(sentences(32)))
    settings = Settings(model=str(tmp_path / "model"), shard_size=16)
    census(read_corpus(texts), tmp_path / "whole", settings, runner=run)
    out = tmp_path / "out"
    census(read_corpus(texts), out, settings, runner=run)
    shard = out / "shards" / "shard-000001.npz"
    sums = ShardSums.load(shard)
    edit(sums)
    sums.save(shard)
    said: list[str] = []
    census(read_corpus(texts), out, settings, runner=run, notice=said.append)
    assert len(said) == 1 and said[0].startswith("1 stored shard could not be read and is computed again: "
                                                 "shard-000001.npz (") and why in said[0]
    for name, value in read_heads(out).items():  # the census of an untouched run, computed the same way
        if value.dtype.kind == "f":
            np.testing.assert_allclose(value, read_heads(tmp_path / "whole")[name], atol=1e-12, rtol=0)


def test_a_registered_model_edited_through_data_is_seen():
    """``param.data.mul_(3)`` bumps no version counter: the kept prefill is keyed on the weights themselves
    (before: layer 1's α after layer 0 was edited was the α of the kept run, the edit never seen)."""
    import attn_gui
    from attn_gui.engine import AttentionConfig, compute
    from attn_gui.engine.model.registry import source
    from transformers_peer import tiny_qwen2, word_tokenizer  # tests/

    sentence = "the cat sat on a mat"
    hf = tiny_qwen2()
    attn_gui.register(hf, word_tokenizer(), name="edited-data")
    first = compute(AttentionConfig(sentence=sentence, model="edited-data", layer=1))  # layer 0's output kept
    hf.model.layers[0].self_attn.v_proj.weight.data.mul_(10)  # layer 0 edited: what layer 1 reads changes
    second = compute(AttentionConfig(sentence=sentence, model="edited-data", layer=1))
    with torch.no_grad():
        out = hf(torch.tensor([source("edited-data").tokenize(sentence).token_ids]), output_attentions=True)
    assert torch.allclose(second.weights, out.attentions[1][0], atol=1e-5, rtol=0)  # transformers' α, edited
    assert not torch.allclose(first.weights, second.weights, atol=1e-3)


def test_a_hook_added_to_a_registered_bridge_is_refused(tmp_path):
    """A hook added to a bridge after ``register()`` is refused at the next compute as one at registration is
    (before: ignored silently, the engine's α and logits not the bridge's)."""
    pytest.importorskip("transformer_lens", reason="the lens extra (pip install attn-gui[lens]) is not installed")
    import attn_gui
    from attn_gui.engine import AttentionConfig, ConfigError, compute
    from lens_bridges import boot, tiny_folder  # tests/
    from tiny_decoders import SENTENCE

    bridge = boot(tiny_folder("llama", tmp_path))
    attn_gui.register(bridge, name="hooked-later")
    compute(AttentionConfig(sentence=SENTENCE, model="hooked-later"))
    bridge.add_hook("blocks.0.attn.hook_z", lambda z, hook: z * 0)
    with pytest.raises(ConfigError, match=r"^hooked-later: the bridge has hooks on blocks\.0\.attn\.hook_z since it "
                                          r"was registered, .* \(bridge\.reset_hooks\(\)\) to run it$"):
        compute(AttentionConfig(sentence=SENTENCE, model="hooked-later"))
    bridge.reset_hooks()
    compute(AttentionConfig(sentence=SENTENCE, model="hooked-later"))
