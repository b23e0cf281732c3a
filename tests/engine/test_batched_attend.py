"""``attend`` on a batch of sequences (B, T, d), as the training loop calls it: every field is
each sequence's own ``attend`` (the window's), for every variant the batch path supports."""

import dataclasses

import pytest
import torch

from attn_gui.engine.kernel.types import AttendOptions, Projections, Stream
from attn_gui.engine.kernel.attend import attend
from attn_gui.engine.kernel.rope import rope_cos_sin, rope_tables, rope_theta

TOL = {torch.float64: 1e-12, torch.float32: 1e-5}  # of the field's largest value (unit weights: scores of tens)


def tensors(steps) -> dict:
    """Every tensor of ``attend``'s steps by name, a group's as "group.name" (rope.angles ...)."""
    out = {}
    for f in dataclasses.fields(steps):
        value = getattr(steps, f.name)
        if dataclasses.is_dataclass(value):
            out.update({f"{f.name}.{k}": v for k, v in tensors(value).items()})
        elif value is not None:
            out[f.name] = value
    return out


SHARED = ("rope.angles", "positions.bias")  # the same for every sequence: not batched


def close(a, b, tol, name):
    """Equal up to the order of float sums: within tol of the field's scale (its largest value, at least 1)."""
    scale = max(1.0, b.abs().max().item())
    torch.testing.assert_close(a, b, atol=tol * scale, rtol=0, msg=lambda m: f"{name}: {m}")


def weights(d, heads, kv_heads, d_k, layout, bias, generator, dtype):
    draw = lambda *shape: torch.randn(*shape, generator=generator, dtype=dtype)  # noqa: E731
    shapes = dict(w_q=(heads, d, d_k), w_k=(kv_heads, d, d_k), w_v=(kv_heads, d, d_k), w_o=(heads * d_k, d))
    w = {name: draw(*shape) for name, shape in shapes.items()}
    if bias:
        w.update(b_q=draw(heads, 1, d_k), b_k=draw(kv_heads, 1, d_k), b_v=draw(kv_heads, 1, d_k), b_o=draw(1, d))
    p = Projections(**w)
    return p if layout == "row" else p.transposed()


VARIANTS = {
    "plain": {},
    "causal rope": dict(causal=True, rope_base=10000.0),
    "rope offset": dict(rope_base=500.0, position_offset=3),
    "alibi window sinks": dict(causal=True, alibi=True, window=3, sink_tokens=1),
    "cosine temperature": dict(similarity="cosine", temperature=0.7, scale=False),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("layout", ["row", "column"])
@pytest.mark.parametrize("heads,kv_heads,bias", [(4, 4, False), (4, 2, True), (3, 1, False)])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_batch_is_each_sequences_attend(variant, heads, kv_heads, bias, layout, dtype):
    g = torch.Generator().manual_seed(heads * 10 + kv_heads)
    B, T, d, d_k = 3, 7, 12, 4
    p = weights(d, heads, kv_heads, d_k, layout, bias, g, dtype)
    x = torch.randn(B, T, d, generator=g, dtype=dtype)
    options = AttendOptions(layout=layout, **VARIANTS[variant])
    batch = tensors(attend(x, p, options))
    rows = [tensors(attend(x[b], p, options)) for b in range(B)]
    assert batch.keys() == rows[0].keys()
    for name, field in batch.items():
        each = torch.stack([r[name] for r in rows])
        expected = rows[0][name] if name in SHARED else each
        assert field.shape == expected.shape, name
        close(field, expected, TOL[dtype], name)
    assert batch["weights"].shape == (B, heads, T, T)


@pytest.mark.parametrize("layout", ["row", "column"])
def test_a_batch_of_cross_attention_and_of_simplified_attention(layout):
    g = torch.Generator().manual_seed(3)
    x, other = torch.randn(2, 5, 8, generator=g), torch.randn(2, 6, 8, generator=g)
    p = weights(8, 2, 2, 4, layout, True, g, torch.float32)
    for w, kv in ((p, other), (p, None), (Projections(), other), (Projections(), None)):
        options = AttendOptions(layout=layout, causal=kv is None)
        batch = tensors(attend(x, w, options, x_kv=kv))
        for b in range(2):
            one = tensors(attend(x[b], w, options, x_kv=None if kv is None else kv[b]))
            for name in one:
                close(batch[name][b], one[name], TOL[torch.float32], name)


def test_a_batch_is_not_streamed():
    with pytest.raises(ValueError, match="batch"):
        attend(torch.zeros(2, 4, 8), Projections(), stream=Stream(2, 2**20))


def test_the_rope_tables_are_computed_afresh_values_and_usable_anywhere():
    theta, cos, sin = rope_tables(9, 6, 500.0, torch.float64, torch.device("cpu"), 2)
    assert torch.equal(theta, rope_theta(9, 6, 500.0, torch.float64, None, 2))
    assert all(torch.equal(a, b) for a, b in zip((cos, sin), rope_cos_sin(theta), strict=False))
    with torch.inference_mode():
        made_in_inference = rope_tables(5, 4, 10000.0, torch.float32, torch.device("cpu"), 0)[1]
    w = torch.ones(5, 4, requires_grad=True)
    (w * made_in_inference).sum().backward()  # an inference tensor could not be saved for backward
    assert torch.equal(w.grad, made_in_inference)


def test_a_batch_with_a_key_value_cache():
    g = torch.Generator().manual_seed(5)
    p = weights(8, 4, 2, 4, "column", False, g, torch.float32)
    x, new = torch.randn(2, 5, 8, generator=g), torch.randn(2, 2, 8, generator=g)
    options = AttendOptions(layout="column", causal=True, rope_base=10000.0)
    first = attend(x, p, options)
    batch = tensors(attend(new, p, options, past=(first.k, first.v)))
    for b in range(2):
        one = tensors(attend(new[b], p, options, past=(first.k[b], first.v[b])))
        for name in one:
            got = batch[name] if name in SHARED else batch[name][b]  # the angles: one for the batch
            close(got, one[name], TOL[torch.float32], name)
    assert batch["weights"].shape == (2, 4, 2, 7)


def test_a_batch_with_per_head_norms():  # Qwen3's q_norm and k_norm, before RoPE
    g = torch.Generator().manual_seed(6)
    p = weights(8, 4, 2, 4, "column", False, g, torch.float32)
    p = Projections(p.w_q, p.w_k, p.w_v, p.w_o, q_norm=torch.rand(4, generator=g) + 0.5,
                    k_norm=torch.rand(4, generator=g) + 0.5)
    x = torch.randn(3, 6, 8, generator=g)
    options = AttendOptions(layout="column", causal=True, rope_base=10000.0)
    batch = tensors(attend(x, p, options))
    assert "qk_norm.q_normed" in batch
    for b in range(3):
        one = tensors(attend(x[b], p, options))
        for name in one:
            close(batch[name] if name in SHARED else batch[name][b], one[name], TOL[torch.float32], name)
