"""The training loop against a plain PyTorch loop, checkpoints against transformers, and heads forming."""

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attn_gui.engine import UserError
from attn_gui.engine.train.loop import Trainer, head_scores
from attn_gui.engine.train.model import TrainConfig

SMALL = TrainConfig(task="induction", symbols=8, length=16, layers=2, heads=2, d_model=32, batch=8, lr=1e-2)


class Reference(nn.Module):
    """The same decoder written as a plain Llama: nn.Linear, RMSNorm, RoPE, torch's SDPA."""

    def __init__(self, c: TrainConfig, mlp: bool):
        super().__init__()
        V, d = c.task_obj.vocab_size, c.d_model
        self.h, self.mlp = c.heads, mlp
        self.embed = nn.Embedding(V, d)
        self.layers = nn.ModuleList()
        for _ in range(c.layers):
            layer = nn.ModuleDict(dict(q=nn.Linear(d, d, bias=False), k=nn.Linear(d, d, bias=False),
                                       v=nn.Linear(d, d, bias=False), o=nn.Linear(d, d, bias=False),
                                       n1=nn.RMSNorm(d, eps=1e-5), n2=nn.RMSNorm(d, eps=1e-5)))
            if mlp:
                layer.update(dict(gate=nn.Linear(d, 4 * d, bias=False), up=nn.Linear(d, 4 * d, bias=False),
                                  down=nn.Linear(4 * d, d, bias=False)))
            self.layers.append(layer)
        self.norm = nn.RMSNorm(d, eps=1e-5)
        self.head = nn.Linear(d, V, bias=False)

    def rope(self, x):  # x (B, h, T, d_k), Llama's rotate_half pairing, base 10000
        T, d_k = x.shape[-2:]
        inv = 1.0 / 10000.0 ** (torch.arange(0, d_k, 2).float() / d_k)
        ang = torch.arange(T).float()[:, None] * inv
        ang = torch.cat([ang, ang], -1)
        half = torch.cat([-x[..., d_k // 2:], x[..., :d_k // 2]], -1)
        return x * ang.cos() + half * ang.sin()

    def forward(self, tokens):
        x = self.embed(tokens)
        B, T, d = x.shape
        for L in self.layers:
            y = L["n1"](x)
            split = lambda t: t.view(B, T, self.h, d // self.h).transpose(1, 2)  # noqa: E731
            q, k, v = split(L["q"](y)), split(L["k"](y)), split(L["v"](y))
            z = F.scaled_dot_product_attention(self.rope(q), self.rope(k), v, is_causal=True)
            x = x + L["o"](z.transpose(1, 2).reshape(B, T, d))
            if self.mlp:
                y = L["n2"](x)
                x = x + L["down"](F.silu(L["gate"](y)) * L["up"](y))
        return self.head(self.norm(x))


class GPT2Reference(nn.Module):
    """The learned-positions decoder written as a plain GPT-2: nn.Embedding for tokens and positions,
    nn.LayerNorm, nn.Linear with biases, torch's SDPA, tanh GELU, the head tied to the embedding."""

    def __init__(self, c: TrainConfig, mlp: bool):
        super().__init__()
        V, d = c.task_obj.vocab_size, c.d_model
        self.h, self.mlp = c.heads, mlp
        self.wte, self.wpe = nn.Embedding(V, d), nn.Embedding(c.max_positions, d)
        self.layers = nn.ModuleList()
        for _ in range(c.layers):
            layer = nn.ModuleDict(dict(q=nn.Linear(d, d), k=nn.Linear(d, d), v=nn.Linear(d, d), o=nn.Linear(d, d),
                                       n1=nn.LayerNorm(d, eps=1e-5), n2=nn.LayerNorm(d, eps=1e-5)))
            if mlp:
                layer.update(dict(up=nn.Linear(d, 4 * d), down=nn.Linear(4 * d, d)))
            self.layers.append(layer)
        self.norm = nn.LayerNorm(d, eps=1e-5)

    def forward(self, tokens):
        B, T = tokens.shape
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        d = x.size(-1)
        for L in self.layers:
            y = L["n1"](x)
            split = lambda t: t.view(B, T, self.h, d // self.h).transpose(1, 2)  # noqa: E731
            z = F.scaled_dot_product_attention(split(L["q"](y)), split(L["k"](y)), split(L["v"](y)), is_causal=True)
            x = x + L["o"](z.transpose(1, 2).reshape(B, T, d))
            if self.mlp:
                x = x + L["down"](F.gelu(L["up"](L["n2"](x)), approximate="tanh"))
        return F.linear(self.norm(x), self.wte.weight)


def _copy_weights(ref: nn.Module, trainer: Trainer):
    m = trainer.model
    if isinstance(ref, GPT2Reference):
        with torch.no_grad():
            ref.wte.weight.copy_(m.embed)
            ref.wpe.weight.copy_(m.positions)
            for L, b in zip(ref.layers, m.blocks, strict=False):
                for name, bias in (("q", "bq"), ("k", "bk"), ("v", "bv"), ("o", "bo")) + \
                        ((("up", "b_up"), ("down", "b_down")) if ref.mlp else ()):
                    L[name].weight.copy_(getattr(b, name))
                    L[name].bias.copy_(getattr(b, bias))
        return
    with torch.no_grad():
        ref.embed.weight.copy_(m.embed)
        ref.head.weight.copy_(m.head)
        for L, b in zip(ref.layers, m.blocks, strict=False):
            for name in ("q", "k", "v", "o") + (("gate", "up", "down") if ref.mlp else ()):
                L[name].weight.copy_(getattr(b, name))


# With the MLP, the two backward passes round differently in the last bit from step 5 on and
# Adam's normalised steps at lr 1e-2 grow that to 5e-6 by step 13; at lr 1e-3 they stay below 1e-6.
@pytest.mark.parametrize("positions, mlp, lr", [("rope", False, 1e-2), ("rope", True, 1e-3),
                                                ("learned", False, 1e-2), ("learned", True, 1e-3)])
def test_first_20_losses_equal_a_plain_pytorch_loop(positions, mlp, lr):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        config = TrainConfig(**{**SMALL.__dict__, "mlp": mlp, "lr": lr, "positions": positions})
        trainer = Trainer(config)
        ref = (Reference if positions == "rope" else GPT2Reference)(config, mlp)
        _copy_weights(ref, trainer)
        opt = torch.optim.AdamW(ref.parameters(), lr=config.lr, weight_decay=0.0)
        data = torch.Generator().manual_seed(config.seed + 1)
        for record in trainer.run(20):
            batch = config.task_obj.batch(config.batch, data)
            loss = F.cross_entropy(ref(batch.inputs)[batch.scored], batch.targets[batch.scored])
            opt.zero_grad()
            loss.backward()
            opt.step()
            assert record.loss == pytest.approx(loss.item(), abs=1e-6)
    finally:
        torch.set_num_threads(threads)


def _per_sequence_forward(model, inputs):
    """The forward as it was before the batch went to ``attend`` whole: ``attend`` per sequence
    under ``torch.vmap``; logits (B, T, V) and alpha (L, B, h, T, T)."""
    from attn_gui.engine.kernel.types import AttendOptions
    from attn_gui.engine.kernel.attend import attend
    from attn_gui.engine.train.model import ROPE_BASE, rms_norm

    x, alphas = model.embed[inputs], []
    for block in model.blocks:
        p = model.projections(block)
        def one(row, p=p):
            f = attend(row, p, AttendOptions(layout="column", causal=True, rope_base=ROPE_BASE))
            return f.output, f.weights
        out = torch.vmap(one)(rms_norm(x, block.norm1))
        x = x + out[0]
        alphas.append(out[1])
        if model.config.mlp:
            y = rms_norm(x, block.norm2)
            x = x + F.silu(y @ block.gate.T) * (y @ block.up.T) @ block.down.T
    return rms_norm(x, model.norm) @ model.head.T, torch.stack(alphas)


@pytest.mark.parametrize("mlp", [False, True])
def test_the_batched_forward_is_each_sequences_attend(mlp):
    # the batch goes through attend at once; each sequence's logits and alpha are what attend
    # gives it alone (the window's call, as the former vmap made), to 1e-6
    config = TrainConfig(**{**SMALL.__dict__, "mlp": mlp, "batch": 5})
    model = Trainer(config).model
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)  # sharper attention than the initial 0.02
        inputs = torch.randint(0, config.task_obj.vocab_size, (config.batch, config.length), generator=g)
        logits, alphas = model(inputs, keep_weights=True)
        ref_logits, ref_alphas = _per_sequence_forward(model, inputs)
    L, B, h, T = config.layers, config.batch, config.heads, config.length
    assert alphas.shape == ref_alphas.shape == (L, B, h, T, T) and logits.shape == ref_logits.shape
    torch.testing.assert_close(logits, ref_logits, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(alphas, ref_alphas, atol=1e-6, rtol=1e-6)
    assert alphas.std() > 0.05  # not near-uniform rows: the comparison means something
    trainer = Trainer(config)
    batch, probe = trainer.probe()
    assert probe.shape == (L, h, batch.inputs.size(1), batch.inputs.size(1))


@pytest.mark.parametrize("positions, model_type", [("rope", "llama"), ("learned", "gpt2")])
@pytest.mark.parametrize("mlp", [False, True])
def test_checkpoint_loads_in_transformers_with_the_same_logits(tmp_path, mlp, positions, model_type):
    import transformers
    tokenizers = pytest.importorskip("tokenizers")
    trainer = Trainer(TrainConfig(**{**SMALL.__dict__, "mlp": mlp, "positions": positions}))
    list(trainer.run(5))
    folder = trainer.save(tmp_path / "ckpt")
    assert json.loads((folder / "config.json").read_text())["model_type"] == model_type
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    assert type(hf).__name__ == {"llama": "LlamaForCausalLM", "gpt2": "GPT2LMHeadModel"}[model_type]
    batch = trainer.task.batch(4, torch.Generator().manual_seed(3))
    with torch.no_grad():
        ours = trainer.model(batch.inputs)
        theirs = hf(batch.inputs).logits
    assert (ours - theirs).abs().max() < 1e-5
    tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert tok.encode("3 1 4").ids == [3, 1, 4]
    # saving again replaces the folder whole
    trainer.save(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]


def test_save_refuses_a_folder_of_other_files(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UserError):
        Trainer(SMALL).save(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_reset_replays_the_same_run():
    trainer = Trainer(SMALL)
    first = [r.loss for r in trainer.run(3)]
    trainer.reset()
    assert [r.loss for r in trainer.run(3)] == first and trainer.steps == 3


def test_attention_only_induction_forms_a_previous_token_head_then_an_induction_head():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer = Trainer(TrainConfig(**{**SMALL.__dict__, "batch": 64}))
        list(trainer.run(250))
    finally:
        torch.set_num_threads(threads)
    batch, alphas = trainer.probe()
    scores = head_scores(alphas, batch)  # (L, h) each
    assert scores["previous"][0].max() > 0.5  # layer 1
    assert scores["induction"][1].max() > 0.5  # layer 2


@pytest.mark.parametrize("change", [dict(layers=5), dict(heads=3), dict(d_model=8), dict(lr=0.0), dict(task="x"),
                                    dict(positions="alibi"), dict(d_model=36, heads=4)])
def test_bad_sizes_are_user_errors(change):
    with pytest.raises(UserError):
        TrainConfig(**change)


def test_learned_positions_allow_an_odd_head_size():
    # RoPE rotates pairs of a head's dimensions; learned positions have no such need
    assert TrainConfig(d_model=36, heads=4, positions="learned").head_dim == 9


@pytest.mark.parametrize("positions", ["rope", "learned"])
def test_a_trained_checkpoint_opens_in_the_explorer_as_transformers_reads_it(tmp_path, positions):
    """"Open in the explorer": the saved folder is a model path; every layer's alpha and the next
    tokens equal transformers' on the same folder."""
    import transformers
    from attn_gui.engine import AttentionConfig, compute

    trainer = Trainer(TrainConfig(**{**SMALL.__dict__, "positions": positions}))
    list(trainer.run(5))
    folder = trainer.save(tmp_path / "ckpt")
    result = compute(AttentionConfig(model=str(folder), sentence="3 1 4 1 5 3 1", layer=1))
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    ids = torch.as_tensor(result.token_ids)[None]
    assert ids.tolist() == [[3, 1, 4, 1, 5, 3, 1]]
    with torch.no_grad():
        out = hf(ids, output_attentions=True)
    assert torch.allclose(result.layer_weights, torch.cat(out.attentions), atol=1e-5)
    p = torch.softmax(out.logits[0, -1], -1)
    assert [float(q) for _, q in result.next_tokens] == pytest.approx(p.topk(5).values.tolist(), abs=1e-5)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_the_apps_adamw_is_torchs_bit_for_bit(weight_decay):
    from attn_gui.engine.train.loop import AdamW

    gen = torch.Generator().manual_seed(0)
    ours = [torch.randn(7, 5, generator=gen, requires_grad=True), torch.randn(3, generator=gen, requires_grad=True)]
    theirs = [p.detach().clone().requires_grad_() for p in ours]
    mine = AdamW(ours, lr=3e-3, weight_decay=weight_decay)
    ref = torch.optim.AdamW(theirs, lr=3e-3, weight_decay=weight_decay)
    for _ in range(50):
        grads = [torch.randn(p.shape, generator=gen) for p in ours]
        for opt, params in ((mine, ours), (ref, theirs)):
            opt.zero_grad()
            for p, g in zip(params, grads, strict=False):
                p.grad = g.clone()
            opt.step()
    for a, b in zip(ours, theirs, strict=False):
        assert torch.equal(a, b)
