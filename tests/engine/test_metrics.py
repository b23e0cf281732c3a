"""Head metrics and attention rollout on matrices whose answers are known by hand."""

import math

import pytest
import torch

from attn_gui.engine import METRICS, AttentionConfig, causal_visible, compute, head_metrics, rollout, saturation
from attn_gui.engine.analysis.scaling import entropy_vs_dk


def uniform(T):
    return torch.full((1, T, T), 1.0 / T)


def test_uniform_rows():
    T = 5
    m = head_metrics(uniform(T))
    assert m["entropy"].shape == (1,)
    assert m["entropy"].item() == pytest.approx(math.log(T))
    assert m["entropy_norm"].item() == pytest.approx(1.0)
    assert m["max_weight"].item() == pytest.approx(0.2)
    assert m["sink"].item() == pytest.approx(0.2)
    assert m["previous"].item() == pytest.approx(0.2)
    assert m["self"].item() == pytest.approx(0.2)
    # mean over i of (1/T) sum_j |i - j| for T = 5: row sums 10, 7, 6, 7, 10 -> 40 / 25
    assert m["distance"].item() == pytest.approx(40 / 25)


def test_identity():
    m = head_metrics(torch.eye(4)[None])
    assert m["entropy"].item() == pytest.approx(0.0) and m["entropy_norm"].item() == pytest.approx(0.0)
    assert m["max_weight"].item() == 1.0 and m["self"].item() == 1.0
    assert m["sink"].item() == pytest.approx(0.25)  # only row 1 puts its weight on token 1
    assert m["previous"].item() == 0.0 and m["distance"].item() == 0.0


def test_previous_token_matrix_and_layers():
    T = 6
    prev = torch.zeros(T, T)
    prev[0, 0] = 1.0
    prev[torch.arange(1, T), torch.arange(0, T - 1)] = 1.0  # row i looks at i - 1
    stacked = torch.stack([torch.stack([prev, torch.eye(T)])] * 3)  # (L=3, h=2, T, T)
    m = head_metrics(stacked)
    assert m["previous"].shape == (3, 2)
    assert torch.equal(m["previous"], torch.tensor([[1.0, 0.0]] * 3))
    assert torch.allclose(m["self"], torch.tensor([[1 / T, 1.0]] * 3))
    assert torch.allclose(m["distance"], torch.tensor([[(T - 1) / T, 0.0]] * 3))
    assert torch.allclose(m["sink"][:, 0], torch.full((3,), 2 / T))  # rows 1 and 2 look at token 1


def test_causal_mask_counts_visible_keys():
    T = 4
    mask = causal_visible(T)
    alpha = mask.float() / mask.sum(-1, keepdim=True)  # uniform over each row's visible keys
    m = head_metrics(alpha[None], mask)
    # row i (1-based) has i keys: entropy ln i; normalised 1 except the first row, which counts as 0
    assert m["entropy"].item() == pytest.approx(sum(math.log(i) for i in range(1, T + 1)) / T)
    assert m["entropy_norm"].item() == pytest.approx((T - 1) / T)
    assert m["max_weight"].item() == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / T)
    assert m["previous"].item() == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    # sum_j alpha_ij |i - j| for row i: mean of 0..i-1 = (i - 1) / 2
    assert m["distance"].item() == pytest.approx(sum((i - 1) / 2 for i in range(1, T + 1)) / T)


def test_rows_without_visible_keys_are_left_out_and_weights_on_hidden_keys_ignored():
    alpha = torch.tensor([[[0.5, 0.5], [0.3, 0.7]]])
    mask = torch.tensor([[True, False], [False, False]])  # row 1 sees key 1 only, row 2 sees nothing
    m = head_metrics(alpha, mask)
    assert m["sink"].item() == pytest.approx(0.5) and m["max_weight"].item() == pytest.approx(0.5)
    assert m["entropy_norm"].item() == 0.0
    assert math.isnan(m["previous"].item())  # no row from the 2nd counts


def test_metrics_against_a_loop():
    torch.manual_seed(0)
    alpha = torch.softmax(torch.randn(3, 7, 7, dtype=torch.float64) * 2, -1)
    m = head_metrics(alpha)
    for h in range(3):
        rows = alpha[h].tolist()
        ent = [-sum(a * math.log(a) for a in row) for row in rows]
        assert m["entropy"][h].item() == pytest.approx(sum(ent) / 7)
        assert m["entropy_norm"][h].item() == pytest.approx(sum(e / math.log(7) for e in ent) / 7)
        assert m["previous"][h].item() == pytest.approx(sum(rows[i][i - 1] for i in range(1, 7)) / 6)
        assert m["distance"][h].item() == pytest.approx(
            sum(rows[i][j] * abs(i - j) for i in range(7) for j in range(7)) / 7)
    assert set(m) == set(METRICS)


def paper_rollout(layer_weights, fusion, residual):
    """Abnar & Zuidema (2020), written out layer by layer with plain loops over heads."""
    L, H, T, _ = layer_weights.shape
    joint = None
    out = []
    for layer in range(L):
        heads = [layer_weights[layer, h] for h in range(H)]
        fused = heads[0].clone()
        for a in heads[1:]:
            fused = fused + a if fusion == "mean" else (torch.maximum(fused, a) if fusion == "max"
                                                        else torch.minimum(fused, a))
        if fusion == "mean":
            fused = fused / H
        if residual:
            fused = 0.5 * fused + 0.5 * torch.eye(T, dtype=fused.dtype)
        fused = fused / fused.sum(dim=-1, keepdim=True)
        joint = fused if joint is None else fused @ joint
        out.append(joint)
    return torch.stack(out)


@pytest.mark.parametrize("fusion", ["mean", "max", "min"])
@pytest.mark.parametrize("residual", [True, False])
def test_rollout_matches_the_papers_formula(fusion, residual):
    torch.manual_seed(1)
    lw = torch.softmax(torch.randn(4, 3, 6, 6, dtype=torch.float64), -1)
    got = rollout(lw, fusion, residual)
    assert got.shape == (4, 6, 6)
    assert torch.allclose(got, paper_rollout(lw, fusion, residual), atol=1e-12)
    assert torch.allclose(got.sum(-1), torch.ones(4, 6, dtype=torch.float64))


def test_rollout_of_identity_heads_is_identity_and_one_layer_is_the_fused_layer():
    eye = torch.eye(5).expand(3, 2, 5, 5)
    assert torch.allclose(rollout(eye), torch.eye(5).expand(3, 5, 5))
    lw = torch.softmax(torch.randn(1, 4, 5, 5), -1)
    expected = 0.5 * lw[0].mean(0) + 0.5 * torch.eye(5)
    assert torch.allclose(rollout(lw)[0], expected / expected.sum(-1, keepdim=True), atol=1e-6)


def test_saturation_counts_one_hot_rows_with_two_keys_or_more():
    alpha = torch.tensor([[[1.0, 0.0, 0.0], [0.995, 0.005, 0.0], [0.4, 0.3, 0.3]]])
    sat = saturation(alpha, torch.tensor([[[1.0, -20.0, 3.0]]]))
    assert sat.one_hot == pytest.approx(2 / 3) and sat.rows == 3 and sat.saturated and sat.span == 20.0
    causal = causal_visible(3)  # the first row has one key: not counted
    sat = saturation(alpha, None, causal)
    assert sat.rows == 2 and sat.one_hot == pytest.approx(0.5) and sat.saturated
    assert not saturation(torch.full((2, 4, 4), 0.25)).saturated


def test_uniform_weights_at_d_model_64_saturate_and_scaled_normal_ones_do_not():
    sat = lambda c: saturation(compute(c).weights, compute(c).scaled)  # noqa: E731
    uniform = AttentionConfig(d_model=64, inputs="uniform", init="uniform")
    assert sat(uniform).saturated and sat(uniform).span > 100
    assert not sat(uniform.replace(init="scaled_normal")).saturated


def test_entropy_sweep_follows_seed_004_argument():
    cfg = AttentionConfig(d_model=64, init="scaled_normal", heads=2)
    sweep = entropy_vs_dk(cfg, d_ks=(1, 16, 256))
    assert sweep.d_ks == (1, 16, 256)
    # d_k = 1: scaling divides by 1, the two curves meet
    assert sweep.scaled[0] == pytest.approx(sweep.unscaled[0])
    # without scaling the entropy collapses as d_k grows; with it, it stays high
    assert sweep.unscaled[2] < 0.2 < 0.7 < sweep.scaled[2]
    # each point is the mean normalised entropy of the alpha compute() gives at that d_k
    r = compute(cfg.replace(d_k=16))
    assert sweep.scaled[1] == pytest.approx(float(head_metrics(r.weights)["entropy_norm"].mean()))
