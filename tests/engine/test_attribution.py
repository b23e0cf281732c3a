"""Why this head (``engine.attribution``) against transformers on tiny random decoders of each family.

- Direct logit attribution: each head's term equals one built from transformers alone: the head's
  columns of o_proj's input (a forward pre-hook) times its W_O columns, the final norm's scale
  on the real residual (a pre-hook on the final norm) and the unembedding row; all terms sum to
  transformers' logit.
- Score attribution: every visible cell's matrix sums to the scaled score; removing one component from
  transformers' residual (norm scale frozen) and recomputing q, k (q_proj, k_proj, transformers' own RoPE)
  changes the score by exactly that component's row (query side) or column (key side).
- The copying score equals a hand computation over the whole V x V matrix with ``torch.linalg.eigvals``.
- The head detector labels an ``attn-gui train --task induction`` model's heads.
"""

import math

import pytest
import torch
import transformers

from attn_gui.engine import AttentionConfig, ConfigError, compute
from attn_gui.engine.model.registry import source
from attn_gui.engine.analysis.attribution.qkov import circuits, copying_scores
from attn_gui.engine.analysis.attribution.heads import detect_heads, detector_scores
from attn_gui.engine.analysis.attribution.logit import direct_logit_attribution, logit_lens
from attn_gui.engine.analysis.attribution.score import score_attribution
from tiny_decoders import FAMILIES, SENTENCE, WORDS, tiny_decoder  # tests/



@pytest.fixture(scope="module", params=sorted(FAMILIES))
def folder(request, tmp_path_factory):
    kind = request.param
    path = tmp_path_factory.mktemp(kind)
    return kind, str(path), tiny_decoder(kind, path)


def _parts(kind, hf):
    """transformers' modules: every layer's output projection, the final norm and the unembedding matrix."""
    if kind == "gpt2":
        return [b.attn.c_proj for b in hf.transformer.h], hf.transformer.ln_f, hf.lm_head.weight
    return [layer.self_attn.o_proj for layer in hf.model.layers], hf.model.norm, hf.lm_head.weight


def _peer_head_terms(kind, hf, ids, u):
    """Each head's direct term in u . logits, from transformers' modules and hooks alone, (L, h)."""
    projections, final, _ = _parts(kind, hf)
    seen = {}
    hooks = [m.register_forward_pre_hook(lambda m, args, i=i: seen.__setitem__(i, args[0][0, -1]))
             for i, m in enumerate(projections)]
    hooks.append(final.register_forward_pre_hook(lambda m, args: seen.__setitem__("x", args[0][0, -1])))
    with torch.no_grad():
        out = hf(ids[None])
    for h in hooks:
        h.remove()
    x = seen["x"]  # the real residual at the last position, (d,)
    eps = final.eps if kind == "gpt2" else final.variance_epsilon
    heads = hf.config.num_attention_heads
    terms = torch.empty(len(projections), heads)
    for layer, proj in enumerate(projections):
        z = seen[layer].view(heads, -1)  # (h, d_v): o_proj's input split by head
        d_v = z.size(-1)
        for i in range(heads):
            cols = slice(i * d_v, (i + 1) * d_v)
            with torch.no_grad():  # GPT-2's Conv1D stores (in, out), nn.Linear (out, in)
                write = z[i] @ proj.weight[cols] if kind == "gpt2" else proj.weight[:, cols] @ z[i]  # (d,)
                if kind == "gpt2":
                    write = (write - write.mean()) / torch.sqrt(x.var(unbiased=False) + eps)
                else:
                    write = write / torch.sqrt(x.pow(2).mean() + eps)
                terms[layer, i] = (write * final.weight) @ u
    return terms, out.logits[0, -1]


@pytest.mark.parametrize("against", [None, "cat"])
def test_direct_logit_attribution_equals_transformers_hooks(folder, against):
    kind, path, hf = folder
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    cfg = AttentionConfig(sentence=SENTENCE, model=path)
    got = direct_logit_attribution(cfg, "mat", against=against)
    u = hf.lm_head.weight[WORDS.index("mat")].detach()
    if against is not None:
        u = u - hf.lm_head.weight[WORDS.index(against)].detach()
    terms, hf_logits = _peer_head_terms(kind, hf, ids, u)
    assert torch.allclose(got.heads, terms.double(), atol=1e-4, rtol=0)
    logit = hf_logits[WORDS.index("mat")] - (0 if against is None else hf_logits[WORDS.index(against)])
    assert got.logit == pytest.approx(float(logit), abs=1e-4)
    assert float(got.values.sum()) == pytest.approx(float(logit), abs=1e-4)  # the components sum to the logit
    assert got.names[0] == "embed" and "L2 mlp" in got.names
    assert ("final norm bias" in got.names) == (kind == "gpt2") and ("positions" in got.names) == (kind == "gpt2")


def _hf_attention(kind, hf, layer):
    return hf.transformer.h[layer].attn if kind == "gpt2" else hf.model.layers[layer].self_attn


def _peer_score(kind, hf, residual, layer, head, query, key):
    """omega'[query, key] of ``head`` from transformers' modules, on a residual (n, d) whose norm scale
    is frozen at ``residual[1]`` (the real one); positions from 0."""
    real, changed = residual
    T = real.size(0)
    d_k = hf.config.hidden_size // hf.config.num_attention_heads if kind != "qwen3" else hf.config.head_dim
    with torch.no_grad():
        if kind == "gpt2":
            ln = hf.transformer.h[layer].ln_1
            s = torch.rsqrt(real.var(-1, unbiased=False, keepdim=True) + ln.eps)
            x = (changed - changed.mean(-1, keepdim=True)) * s * ln.weight + ln.bias
            q, k, _ = hf.transformer.h[layer].attn.c_attn(x).split(hf.config.hidden_size, dim=-1)
            q, k = q.view(T, -1, d_k).transpose(0, 1), k.view(T, -1, d_k).transpose(0, 1)
        else:
            block = hf.model.layers[layer]
            norm = block.input_layernorm
            x = changed * torch.rsqrt(real.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon) * norm.weight
            attn = block.self_attn
            q, k = attn.q_proj(x).view(T, -1, d_k), attn.k_proj(x).view(T, -1, d_k)
            if kind == "qwen3":  # the per-head norms' scale frozen too: on the real q and k
                q_real, k_real = attn.q_proj(_normed(real, norm)).view(T, -1, d_k), \
                    attn.k_proj(_normed(real, norm)).view(T, -1, d_k)
                q = q * torch.rsqrt(q_real.pow(2).mean(-1, keepdim=True) + attn.q_norm.variance_epsilon) \
                    * attn.q_norm.weight
                k = k * torch.rsqrt(k_real.pow(2).mean(-1, keepdim=True) + attn.k_norm.variance_epsilon) \
                    * attn.k_norm.weight
            q, k = q.transpose(0, 1)[None], k.transpose(0, 1)[None]  # (1, h, T, d_k)
            position_ids = torch.arange(T)[None]
            cos, sin = hf.model.rotary_emb(x[None], position_ids)
            q, k = transformers.models.llama.modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)
            q, k = q[0], k[0]
        group = head // (q.size(0) // k.size(0))
        return float(q[head, query] @ k[group, key] / math.sqrt(d_k))


def _normed(x, norm):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon) * norm.weight


def _peer_residual_parts(kind, hf, ids):
    """The residual entering layer 2 from transformers, and its named parts: embeddings, each head of layer 1
    (o_proj input hooks), layer 1's attention bias and its MLP (forward hooks)."""
    seen = {}
    if kind == "gpt2":
        block = hf.transformer.h[0]
        proj, mlp = block.attn.c_proj, block.mlp
    else:
        block = hf.model.layers[0]
        proj, mlp = block.self_attn.o_proj, block.mlp
    hooks = [proj.register_forward_pre_hook(lambda m, args: seen.__setitem__("z", args[0][0])),
             mlp.register_forward_hook(lambda m, args, out: seen.__setitem__("mlp", out[0]))]
    with torch.no_grad():
        out = hf(ids[None], output_hidden_states=True)
    for h in hooks:
        h.remove()
    heads = hf.config.num_attention_heads
    z = seen["z"].view(len(ids), heads, -1)  # (T, h, d_v)
    d_v = z.size(-1)
    parts = {}
    with torch.no_grad():
        if kind == "gpt2":
            parts["embed"] = hf.transformer.wte(ids)
            parts["positions"] = hf.transformer.wpe(torch.arange(len(ids)))
        else:
            parts["embed"] = hf.model.embed_tokens(ids)
        for i in range(heads):
            cols = slice(i * d_v, (i + 1) * d_v)
            parts[f"L1H{i + 1}"] = z[:, i] @ proj.weight[cols] if kind == "gpt2" else z[:, i] @ proj.weight[:, cols].T
        if proj.bias is not None:
            parts["L1 attn bias"] = proj.bias.expand_as(parts["embed"])
        parts["L1 mlp"] = seen["mlp"]
    return out.hidden_states[1][0], parts


def test_score_attribution_sums_to_every_score_and_removing_a_component_is_its_row(folder):
    kind, path, hf = folder
    cfg = AttentionConfig(sentence=SENTENCE, model=path, layer=1)
    scaled = compute(cfg).scaled  # (h, T, T): equal to transformers' (alpha is, tests/engine/test_model_folders)
    T = scaled.size(-1)
    for head in range(scaled.size(0)):
        for query in range(T):
            for key in range(query + 1):
                a = score_attribution(cfg, head, query, key)
                assert float(a.matrix.sum()) == pytest.approx(float(scaled[head, query, key]), abs=1e-4)
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    real, parts = _peer_residual_parts(kind, hf, ids)
    assert torch.allclose(sum(parts.values()), real, atol=1e-4)  # the parts are the whole residual
    head, query, key = 3, 7, 2
    a = score_attribution(cfg, head, query, key)
    assert a.query_names[:len(parts)] == list(parts)
    full = _peer_score(kind, hf, (real, real), 1, head, query, key)
    assert a.score == pytest.approx(full, abs=1e-4)
    for index, name in enumerate(parts):
        removed = real.clone()
        removed[query] -= parts[name][query]  # the query side without this component
        without = _peer_score(kind, hf, (real, removed), 1, head, query, key)
        assert full - without == pytest.approx(float(a.matrix[index].sum()), abs=1e-4), name
        removed = real.clone()
        removed[key] -= parts[name][key]  # the key side
        without = _peer_score(kind, hf, (real, removed), 1, head, query, key)
        assert full - without == pytest.approx(float(a.matrix[:, index].sum()), abs=1e-4), name


def test_score_attribution_refuses_a_masked_key_and_a_missing_head(folder):
    _, path, _ = folder
    cfg = AttentionConfig(sentence=SENTENCE, model=path, layer=1)
    with pytest.raises(ConfigError, match="cannot see"):
        score_attribution(cfg, 0, 2, 5)
    with pytest.raises(ConfigError, match="head 9 does not exist"):
        score_attribution(cfg, 8, 2, 1)


def _head_matrices(kind, hf, layer, head):
    """Head ``head``'s W_Q (d_k, d), W_K, W_V (d_v, d) of its K/V group, W_O (d, d_v) and the layer norm's gain,
    read from transformers' modules (float64)."""
    heads, d = hf.config.num_attention_heads, hf.config.hidden_size
    if kind == "gpt2":
        block = hf.transformer.h[layer]
        w_q_all, w_k_all, w_v_all = (w.T for w in block.attn.c_attn.weight.split(d, dim=1))  # Conv1D (in, out)
        w_o_all, gamma = block.attn.c_proj.weight.T, block.ln_1.weight  # (d, h*d_v)
    else:
        block = hf.model.layers[layer]
        a = block.self_attn
        w_q_all, w_k_all, w_v_all, w_o_all = a.q_proj.weight, a.k_proj.weight, a.v_proj.weight, a.o_proj.weight
        gamma = block.input_layernorm.weight
    d_v = w_o_all.size(1) // heads
    g = head // (heads // (w_v_all.size(0) // d_v))
    pick = lambda w, i: w[i * d_v:(i + 1) * d_v].detach().double()  # noqa: E731
    return (pick(w_q_all, head), pick(w_k_all, g), pick(w_v_all, g),
            w_o_all[:, head * d_v:(head + 1) * d_v].detach().double(), gamma.detach().double())


def test_copying_score_equals_eigvals_of_the_whole_ov_circuit(folder):
    kind, path, hf = folder
    scores = copying_scores(AttentionConfig(sentence=SENTENCE, model=path))
    _, final, w_u = _parts(kind, hf)
    w_e = hf.get_input_embeddings().weight.detach().double()  # (V, d)
    for layer in range(2):
        for i in range(hf.config.num_attention_heads):
            _, _, w_v, w_o, gamma = _head_matrices(kind, hf, layer, i)
            full = w_u.detach().double() @ torch.diag(final.weight.detach().double()) @ w_o @ w_v \
                @ torch.diag(gamma) @ w_e.T  # (V, V)
            lam = torch.linalg.eigvals(full)
            expected = float(lam.sum().real / lam.abs().sum())
            assert float(scores[layer, i]) == pytest.approx(expected, abs=1e-6)


def test_circuits_equal_the_weights_products_over_the_sentences_tokens(folder):
    kind, path, hf = folder
    c = circuits(AttentionConfig(sentence=SENTENCE, model=path, layer=1), 2)
    distinct = list(dict.fromkeys(SENTENCE.split()))
    assert c.tokens == distinct
    ids = torch.tensor([WORDS.index(t) for t in distinct])
    _, final, w_u = _parts(kind, hf)
    w_q, w_k, w_v, w_o, gamma = _head_matrices(kind, hf, 1, 2)
    x = hf.get_input_embeddings().weight.detach().double()[ids] * gamma  # (u, d)
    qk = (x @ w_q.T) @ (x @ w_k.T).T / math.sqrt(w_q.size(0))
    ov = (x @ w_v.T @ w_o.T * final.weight.detach().double()) @ w_u.detach().double()[ids].T
    assert torch.allclose(c.qk, qk, atol=1e-4) and torch.allclose(c.ov, ov, atol=1e-4)


def test_logit_lens_last_row_is_the_models_own_top_tokens(folder):
    _, path, _ = folder
    cfg = AttentionConfig(sentence=SENTENCE, model=path)
    lens = logit_lens(cfg, k=3)
    assert lens.probs.shape == (3, 10, 3)
    top = compute(cfg).next_tokens
    assert lens.tokens[-1][-1] == [t for t, _ in top[:3]]
    assert lens.probs[-1, -1].tolist() == pytest.approx([p for _, p in top[:3]], abs=1e-5)


def test_detector_scores_follow_their_definitions():
    ids = (5, 6, 7, 5, 6)  # a b c a b: token 3 repeats 0, token 4 repeats 1
    n = len(ids)
    weights = torch.zeros(1, 4, n, n)
    weights[0, 0, torch.arange(1, n), torch.arange(n - 1)] = 1  # previous token
    weights[0, 1, 3, 0] = weights[0, 1, 4, 1] = 1  # the earlier copy of the same token
    weights[0, 2, 3, 1] = weights[0, 2, 4, 2] = 1  # the token after the earlier copy
    weights[0, 3, :, 0] = 1  # the first token
    s = detector_scores(weights, ids)
    # rows: previous-token and sink 1 to 4; duplicate-token and induction 3 and 4
    assert s["previous-token"][0].tolist() == [1.0, 0.0, 0.0, 1 / 4]
    assert s["duplicate-token"][0].tolist() == [0.0, 1.0, 0.0, 1 / 2]
    assert s["induction"][0].tolist() == [0.0, 0.0, 1.0, 0.0]
    assert s["sink"][0].tolist() == [1 / 4, 1 / 4, 0.0, 1.0]


def test_detector_labels_a_trained_induction_model(tmp_path):
    """``attn-gui train --task induction`` (as tests/engine/test_training's run): the detector finds its layer-1
    previous-token head and its layer-2 induction head on the probe sequence."""
    from attn_gui.engine.train.loop import Trainer
    from attn_gui.engine.train.model import TrainConfig

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer = Trainer(TrainConfig(task="induction", symbols=8, length=16, layers=2, heads=2, d_model=32,
                                      batch=64, lr=1e-2))
        list(trainer.run(250))
    finally:
        torch.set_num_threads(threads)
    folder = trainer.save(tmp_path / "ckpt")
    batch = trainer.task.probe()
    sentence = trainer.task.sentence(batch.inputs[0])
    found = detect_heads(AttentionConfig(sentence=sentence, model=str(folder)))
    assert "previous-token" in found.labels[0]
    assert "induction" in found.labels[1]


def test_smollm2_gguf_dla_equals_transformers(smollm2_peer):
    """The bundled GGUF decoder: each head's term equals the transformers peer's (its GGUF loader), and the
    figure of docs/benchmarks.md: head 24.5 writes " Paris" most."""
    hf, _ = smollm2_peer
    cfg = AttentionConfig(sentence="The capital of France is", model="smollm2-135m")
    a = direct_logit_attribution(cfg, " Paris")
    ids = torch.tensor(source("smollm2-135m").tokenize(cfg.sentence).token_ids)
    terms, hf_logits = _peer_head_terms("llama", hf, ids, hf.lm_head.weight[a.token].detach())
    assert torch.allclose(a.heads, terms.double(), atol=1e-4, rtol=0)
    assert float(a.values.sum()) == pytest.approx(a.logit, abs=1e-4)
    assert a.logit == pytest.approx(float(hf_logits[a.token]), rel=1e-5)
    assert divmod(int(a.heads.argmax()), 9) == (23, 4)


def test_a_forward_step_the_split_does_not_know_is_refused(folder, monkeypatch):
    """If the decoder's layer computes something the components miss (here: the split's head writes made to differ
    from what the layer's W_O wrote), the attribution refuses in one line instead of splitting wrongly."""
    from attn_gui.engine.analysis.attribution import trace as attribution

    _, path, _ = folder
    real = attribution.head_writes
    monkeypatch.setattr(attribution, "head_writes", lambda *args: 1.5 * real(*args))
    with pytest.raises(ConfigError, match="has a step the attribution does not split"):
        direct_logit_attribution(AttentionConfig(sentence=SENTENCE, model=path))
