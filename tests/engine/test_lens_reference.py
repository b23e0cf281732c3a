"""TransformerLens 4 as the reference of the engine's analyses (issue 50), on two families (a tiny random Llama
and GPT-2), each a bridge registered with the engine (``attn_gui.register``) so both read the very same weights.

- Direct logit attribution: each head's term (``attribution.direct_logit_attribution``) equals the cache's
  ``stack_head_results(apply_ln=True)`` (the final norm's scale frozen on the real residual) times the
  unembedding column, in compatibility mode (HookedTransformer's folded LayerNorm and centred weights).
- Zero and mean ablation (``interventions.ablate``) equal ``run_with_hooks`` with a hook on ``hook_z``
  that zeroes the head, or replaces it by its mean over the positions, plain and in compatibility mode.
- The logit lens (``attribution.logit_lens``) equals ``accumulated_resid(apply_ln=True)`` (each residual
  through the final norm with its own scale) through W_U and b_U: the top 5 tokens and their p.

Edge attribution patching against TransformerLens' waits for the circuits issue (its EAP).
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformer_lens", reason="the lens extra (pip install attn-gui[lens]) is not installed")

import attn_gui  # noqa: E402
from attn_gui.engine import AttentionConfig  # noqa: E402
from attn_gui.engine.model.registry import source
from attn_gui.engine.analysis.attribution.logit import direct_logit_attribution, logit_lens  # noqa: E402
from attn_gui.engine.analysis.interventions import ablate  # noqa: E402
from lens_bridges import KINDS, boot, tiny_folder  # noqa: E402  tests/
from tiny_decoders import SENTENCE  # noqa: E402  tests/


@pytest.fixture(scope="module", params=KINDS)
def folder(request, tmp_path_factory):
    return request.param, tiny_folder(request.param, tmp_path_factory.mktemp(request.param))


def _registered(folder, compat: bool):
    """A fresh bridge of ``folder`` registered with the engine; (bridge, config, token ids, logits, cache)."""
    kind, path = folder
    bridge = boot(path, compat)
    name = attn_gui.register(bridge, name=f"reference-{kind}-{compat}")
    ids = list(source(name).tokenize(SENTENCE).token_ids)
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(torch.tensor([ids]))
    return bridge, AttentionConfig(sentence=SENTENCE, model=name), ids, logits[0], cache


def _close(ours: torch.Tensor, theirs: torch.Tensor, relative: float) -> bool:
    return float((ours.double() - theirs.double()).abs().max()) <= relative * float(theirs.abs().max())


def test_direct_logit_attribution_equals_stack_head_results(folder):
    bridge, cfg, _, logits, cache = _registered(folder, compat=True)
    token = int(logits[-1].argmin())  # any token: the least likely one, away from the top the engine defaults to
    with torch.no_grad():
        stack = cache.stack_head_results(layer=-1, pos_slice=-1, apply_ln=True)  # (L h, 1, d) at the last position
        theirs = (stack[:, 0] @ bridge.W_U[:, token]).view(bridge.cfg.n_layers, bridge.cfg.n_heads)
    ours = direct_logit_attribution(cfg, token)
    assert ours.token == token
    assert _close(ours.heads, theirs, 1e-5)


@pytest.mark.parametrize("compat", [False, True], ids=["plain", "compatibility"])
@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_ablation_equals_a_hook_on_hook_z(folder, compat, mode):
    bridge, cfg, ids, logits, _ = _registered(folder, compat)
    layer, head = 1, 2

    def knock_out(z, hook):  # z: (batch, pos, head, d_head)
        z = z.clone()
        z[:, :, head] = 0.0 if mode == "zero" else z[:, :, head].mean(1, keepdim=True)
        return z

    with torch.no_grad():
        theirs = bridge.run_with_hooks(torch.tensor([ids]), fwd_hooks=[(f"blocks.{layer}.attn.hook_z", knock_out)])
    ours = ablate(cfg, [(layer, head)], mode).logits
    assert torch.allclose(ours, theirs[0, -1], atol=1e-4, rtol=0)
    assert not torch.allclose(theirs[0, -1], logits[-1], atol=1e-4)  # the head mattered: the check means something


def test_the_logit_lens_equals_accumulated_resid(folder):
    bridge, cfg, ids, _, cache = _registered(folder, compat=True)
    with torch.no_grad():
        normed = cache.accumulated_resid(apply_ln=True)[:, 0]  # (L + 1, n, d): each through the final norm, own scale
        p = torch.softmax((normed @ bridge.W_U + bridge.b_U).double(), -1)
    top = p.topk(5, -1)
    ours = logit_lens(cfg, k=5)
    assert torch.allclose(ours.probs, top.values, atol=1e-5, rtol=0)
    src = source(cfg.model)
    assert ours.tokens == [[[src.token_text(i) for i in row] for row in layer] for layer in top.indices.tolist()]


POINTS = ("hook_resid_pre", "attn.hook_pattern", "attn.hook_z", "hook_attn_out", "hook_resid_mid", "hook_mlp_out",
          "hook_resid_post")


def test_the_forwards_hook_points_equal_run_with_cache(folder):
    """The one decoder forward, kept (``forward(..., keep=True)``), names its points as TransformerLens does, and
    each equals the bridge's cache of the same name (plain mode: no folded norms); its logits are the bridge's."""
    bridge, cfg, ids, logits, cache = _registered(folder, compat=False)
    run = source(cfg.model).forward(torch.tensor(ids), "cpu", torch.float32, keep=True)
    kept = run.activations
    assert torch.allclose(kept["hook_embed"] + kept.get("hook_pos_embed", 0),
                          cache["blocks.0.hook_resid_pre"][0], atol=1e-5)
    for layer in range(bridge.cfg.n_layers):
        for point in POINTS:
            name = f"blocks.{layer}.{point}"
            theirs = cache[name][0]
            if point == "attn.hook_z":  # TransformerLens: (pos, head, d_head); ours (head, pos, d_v)
                theirs = theirs.transpose(0, 1)
            assert kept[name].shape == theirs.shape, name
            assert _close(kept[name], theirs, 1e-5), name
    assert _close(run.logits, logits[-1], 1e-5)


def test_a_hook_point_that_is_only_read_is_refused_in_one_line(folder):
    _, cfg, ids, _, _ = _registered(folder, compat=False)
    with pytest.raises(ValueError, match="blocks.0.attn.hook_pattern is read, not changed"):
        source(cfg.model).forward(torch.tensor(ids), "cpu", torch.float32,
                                  hooks={"blocks.0.attn.hook_pattern": lambda a: a})
