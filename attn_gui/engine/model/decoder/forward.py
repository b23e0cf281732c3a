"""The decoder's forward pass, written out, with its key/value cache: Llama, and GPT-2 as declared differences.

Per layer: a norm, then attention through the engine's one ``attend`` (causal,
RoPE with the half-split pairing, grouped-query K/V heads), the residual, a norm, the
feed-forward, the residual; then the final norm and the output head. Weights are named as
transformers' ``LlamaForCausalLM`` names them (``model.layers.3.self_attn.q_proj.weight``),
in nn.Linear's (out, in) layout; the tests compare every step with that class.

GPT-2 is the same path with three differences declared in ``LlamaShape``: LayerNorm with a
bias instead of RMSNorm, learned absolute positions added to the token embedding instead of
RoPE, and a GELU (tanh) feed-forward with biases instead of SwiGLU; its reader renames and
splits its weights into the names above (``hf.gpt2_weights``). Mistral's sliding window is
the engine's window mask in every layer (``LlamaShape.window``). GPT-NeoX (Pythia) is GPT-2's
LayerNorm and GELU with RoPE on part of each head (``rope_dims``) and, where it says so, attention
and the MLP reading the same residual (``parallel``); its fused per-head Q/K/V split by ``hf.neox_weights``.

The same ``forward`` serves a whole sentence (the prefill) and one more token at a time
(a decode step): given the ``KVCache`` of the tokens before, each layer computes q, k and v
of the new tokens only and attends to the cached keys and values plus its own.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ...kernel.scores import scaled_scores, score_weights
from ...base import progress
from ...kernel.types import AttendOptions, Projections, Steps, Stream
from ...kernel.attend import attend
from ...kernel.blocks import attend_summarised
from ...kernel.scores import masked_keys
from ...kernel.project import project_outputs, queries_keys_values, repeat_kv, rms_norm
from ...kernel.summaries import Summaries
from ...readers import stored
from ...readers.stored import rows


@dataclass(frozen=True)
class LlamaShape:
    """The sizes and constants of a decoder, and each layer's attention as the model runs it.

    Built once per model by ``decoder_shape`` from its spec and family (folders, GGUF files, registered
    objects alike). A compute whose plan changes the attention (a what-if, ``engine.plan``) runs the same
    forward with ``attention`` replaced (``with_attention``).
    """

    layers: int
    heads: int
    kv_heads: int
    d_k: int
    eps: float  # the norm's epsilon
    norm: str = "rms"  # "rms": RMSNorm (Llama); "layer": LayerNorm with a bias (GPT-2); "gemma": x̂ (1 + g), float32
    mlp: str = "gated"  # "gated": W_down (act(W_gate x) * W_up x) (SwiGLU); "plain": W_down act(W_up x + b) + b
    act: str = "silu"  # the feed-forward's activation (``act``): silu, gelu, gelu_tanh, relu
    block: str = "pre"  # the residual wiring: a row of ``BLOCKS``
    attention: tuple[AttendOptions, ...] = ()  # each layer's options (``sources.layers.model_layers``); ():
    #                                            plain causal attention in every layer
    final_softcap: float | None = None  # the logits soft-capped, c tanh(logits / c) (final_logit_softcapping)
    embed_scale: bool = False  # the embedding multiplied by √d (Gemma)

    def options(self, layer: int) -> AttendOptions:
        """Layer ``layer``'s attention options (column layout, causal)."""
        return self.attention[layer] if self.attention else CAUSAL

    def with_attention(self, attention: tuple[AttendOptions, ...]) -> LlamaShape:
        """This shape with each layer's attention options replaced (a plan's what-if)."""
        return self if attention == self.attention else dataclasses.replace(self, attention=attention)


CAUSAL = AttendOptions(layout="column", causal=True)


def decoder_shape(spec, family, eps: float, act: str, final_softcap: float | None = None) -> LlamaShape:
    """The one constructor of a decoder's shape: its spec (sizes, each layer's attention, its residual wiring) and
    its family's declared differences (norm, MLP, embedding scale); the norm's ``eps``, the activation (``act``'s
    name) and the logits' soft-cap as the file says."""
    from ..layers import model_layers

    return LlamaShape(spec.layers, spec.heads, spec.kv_head_count, spec.d_k, eps, norm=family.norm, mlp=family.mlp,
                      act=act, block=spec.block, attention=model_layers(spec), final_softcap=final_softcap,
                      embed_scale=family.embed_scale)


@dataclass(frozen=True)
class Block:
    """A decoder layer's residual wiring: which norm each part reads through and writes through.

    Each name is a norm's weight prefix within the layer (``model.layers.N.<name>``), or None where there is none.
    attn_norm: before attention (X); attn_post: attention's output normed before its residual; mlp_norm: before the
    MLP; mlp_post: the MLP's output normed before its residual; parallel: the MLP reads the layer's input residual
    (attention and the MLP side by side), not the residual after attention.
    """

    attn_norm: str | None
    attn_post: str | None
    mlp_norm: str | None
    mlp_post: str | None
    parallel: bool = False

    @property
    def norms(self) -> tuple[str, ...]:
        """Every norm of the layer, by prefix."""
        return tuple(n for n in (self.attn_norm, self.attn_post, self.mlp_norm, self.mlp_post) if n is not None)


BLOCKS = {  # ``Family.block``: the residual wiring of each family's layers
    "pre": Block("input_layernorm", None, "post_attention_layernorm", None),  # Llama, Qwen, Mistral, Phi-3, GPT-2
    "parallel": Block("input_layernorm", None, "post_attention_layernorm", None, parallel=True),  # GPT-NeoX
    "sandwich": Block("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                      "post_feedforward_layernorm"),  # Gemma 2 and 3
    "post": Block(None, "post_attention_layernorm", None, "post_feedforward_layernorm"),  # OLMo 2
}


@dataclass(frozen=True)
class LayerPieces:
    """One decoder layer's named pieces, as TransformerLens's hook points name the residual stream's parts.

    resid_pre (n, d): the residual entering the layer; attn_in: X, what attention reads (its norm's output, or the
    residual); steps: attention's steps (``Steps``); attn_write: what attention adds to the residual
    (its output, normed where the block says: ``Block.attn_post``); resid_mid: the residual after attention;
    mlp_in: what the MLP reads; mlp_out: its output; mlp_write: what it adds; resid_post: the residual leaving.
    """

    resid_pre: torch.Tensor
    attn_in: torch.Tensor
    steps: Steps
    attn_write: torch.Tensor
    resid_mid: torch.Tensor
    mlp_in: torch.Tensor
    mlp_out: torch.Tensor
    mlp_write: torch.Tensor
    resid_post: torch.Tensor


@dataclass(frozen=True)
class KVCache:
    """Every layer's keys (after RoPE) and values of the tokens read so far, on the compute device.

    Attributes
    ----------
    keys, values : tuple of L tensors (g, P, d_k) and (g, P, d_v)
    """

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]

    @property
    def length(self) -> int:
        """P, the number of cached positions."""
        return self.keys[0].size(-2)


@dataclass(frozen=True)
class Forward:
    """One pass over n new tokens (all of a sentence, or the next one after a cache of P).

    Attributes
    ----------
    residual : list of L + 1 tensors (n, d)
        The residual stream entering each layer (transformers' ``hidden_states[l]``); the last
        is the final RMSNorm of the output, as transformers' last hidden state.
    inputs : list of L tensors (n, d)
        What each layer's attention reads: RMSNorm of its residual stream (X in the window).
    weights : (L, h, n, P + n), or None when streamed
        Every layer's attention weights of the new query rows against every key.
    cache : KVCache
        The keys and values of all P + n tokens: the next step's cache.
    logits : (V,)
        The next-token logits after the last token.
    summaries : Summaries, or None after a cache
        Every layer's and head's sink mass, distance, decay and top keys (``engine.summaries``);
        streamed, also each layer's α pooled (``maps``).
    last_weights : (L, h, P + n)
        Every layer's α of the last query row (the row the next token is predicted from).
    shown : (layer, steps), or None
        Streamed with ``shown_layer``: that layer's ``attend_summarised`` steps, its ω,
        scaled scores and α pooled, so that the window's shown layer is not computed again.

    A streamed run (``forward(..., reduce_to=r)``) keeps no T x T map: ``weights`` is None and
    ``residual`` holds the final norm's output only.
    """

    residual: list[torch.Tensor]
    inputs: list[torch.Tensor]
    weights: torch.Tensor | None
    cache: KVCache
    logits: torch.Tensor
    summaries: Summaries | None = None
    last_weights: torch.Tensor | None = None
    shown: tuple[int, Steps] | None = None


def norm(x: torch.Tensor, w: dict, prefix: str, shape: LlamaShape) -> torch.Tensor:
    """The model's norm of ``x`` with the weights at ``prefix``: RMSNorm, or LayerNorm with its bias (GPT-2)."""
    if shape.norm == "layer":
        return F.layer_norm(x, x.shape[-1:], w[prefix + ".weight"], w[prefix + ".bias"], shape.eps)
    if shape.norm == "gemma":  # Gemma's RMSNorm: in float32, the gain 1 + g (stored as g, zero-centred)
        return rms_norm(x.float(), 1.0 + w[prefix + ".weight"].float(), shape.eps).type_as(x)
    return rms_norm(x, w[prefix + ".weight"], shape.eps)


def gain(w: dict, prefix: str, shape: LlamaShape) -> torch.Tensor:
    """The gain the norm at ``prefix`` multiplies by, as the family applies it: γ, or Gemma's 1 + γ (stored
    zero-centred; in float32, as ``norm`` computes it)."""
    g = w[prefix + ".weight"]
    return 1.0 + g.float() if shape.norm == "gemma" else g


def head_weights(w: dict, layer: int, shape: LlamaShape, multiply: bool = False) -> Projections:
    """Layer ``layer``'s projections per head, in column layout (q_i = W x_i + b).

    nn.Linear stores W_q as (h * d_k, d); head i owns rows i*d_k:(i+1)*d_k (K and V: g heads).
    Q, K and V have biases where the weights hold them (Qwen2, GPT-2), else none (Llama); W_O too (GPT-2);
    q and k are RMS-normed per head where the weights hold q_norm and k_norm (Qwen3).
    ``multiply`` (the forward's own): where ``w`` multiplies its stored matrices in bfloat16
    (``stored.matrix``), W_Q … W_O come as those matrices (``Projections.matmuls``), the W fields as shapes.
    """
    p = f"model.layers.{layer}.self_attn"
    names = [f"{p}.{n}_proj.weight" for n in "qkvo"]
    matmuls = [stored.matrix(w, name) for name in names] if multiply else []
    if matmuls and all(m is not None for m in matmuls):
        w_q, w_k, w_v, w_o = (torch.empty(m.shape, device="meta") for m in matmuls)  # type: ignore[union-attr]
    else:
        matmuls = []
        w_q, w_k, w_v, w_o = (w[name] for name in names)  # read once: an upcasting ``w`` converts on every read
    d = w_q.shape[1]
    extras: dict = {"matmuls": tuple(matmuls)} if matmuls else {}
    if f"{p}.q_norm.weight" in w:
        q_norm, k_norm = w[f"{p}.q_norm.weight"], w[f"{p}.k_norm.weight"]  # (d_k,)
        if shape.norm == "gemma":  # Gemma 3: the gain 1 + g
            q_norm, k_norm = 1.0 + q_norm, 1.0 + k_norm
        extras |= dict(q_norm=q_norm, k_norm=k_norm, norm_eps=shape.eps)
    if f"{p}.q_proj.bias" in w:
        extras |= dict(b_q=w[f"{p}.q_proj.bias"].view(shape.heads, 1, -1),  # (h, 1, d_k)
                       b_k=w[f"{p}.k_proj.bias"].view(shape.kv_heads, 1, -1),  # (g, 1, d_k)
                       b_v=w[f"{p}.v_proj.bias"].view(shape.kv_heads, 1, -1))  # (g, 1, d_v)
    return Projections(
        w_q=w_q.view(shape.heads, -1, d),  # (h, d_k, d)
        w_k=w_k.view(shape.kv_heads, -1, d),  # (g, d_k, d)
        w_v=w_v.view(shape.kv_heads, -1, d),  # (g, d_v, d)
        w_o=w_o,  # (d, h * d_v)
        b_o=w[f"{p}.o_proj.bias"].view(1, -1) if f"{p}.o_proj.bias" in w else None,  # (1, d)
        **extras,
    )


ACTS = {"gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "relu": F.relu, "silu": F.silu}


def act(x: torch.Tensor, name: str) -> torch.Tensor:
    """The feed-forward's activation by name: gelu (erf, BERT's), gelu_tanh (GPT-2's "gelu_new"), relu, silu."""
    return ACTS[name](x)


def _linear(x: torch.Tensor, w: dict, prefix: str) -> torch.Tensor:
    """nn.Linear at ``prefix``, with its bias where the weights hold one (Llama's mlp_bias, GPT-2)."""
    bias = prefix + ".bias"
    return stored.linear(x, w, prefix + ".weight", w.get(bias))  # in bfloat16 where w multiplies so


def feed_forward(x: torch.Tensor, w: dict, layer: int, shape: LlamaShape) -> torch.Tensor:
    """Gated: W_down (act(W_gate x) * W_up x) (SwiGLU with silu); plain: W_down act(W_up x + b_up) + b_down (GPT-2);
    each with its biases where the weights hold them.  (n, d) -> (n, d)"""
    p = f"model.layers.{layer}.mlp"
    if shape.mlp == "plain":
        return _linear(act(_linear(x, w, f"{p}.up_proj"), shape.act), w, f"{p}.down_proj")
    return _linear(act(_linear(x, w, f"{p}.gate_proj"), shape.act) * _linear(x, w, f"{p}.up_proj"), w,
                   f"{p}.down_proj")


KEPT_BLOCK_BYTES = 16 * 2**20  # ω and α of a block of rows (``kept_attention``): 4 and 64 MiB were slower


def kept_attention(x: torch.Tensor, p: Projections, alpha: torch.Tensor, scratch: torch.Tensor,
                   options: AttendOptions, *, past: tuple[torch.Tensor, torch.Tensor] | None = None, z_hook=None,
                   summaries: list | None = None) -> Steps:
    """``attend(x, p, options, past=past)``'s α, q, k, v, z and output, nothing else kept; with ``summaries``,
    the layer's summaries (``summaries.LayerSums.finish``'s) appended to it.

    A model run keeps only these of every layer; ω and ω′ are the shown layer's alone, which
    ``attend`` makes again. Here the query rows go a block at a time, each block against the keys
    up to its last query only (causal: the later keys' α is 0, and is written as 0): its ω made in
    ``scratch`` (``kept_scratch``'s size, reused layer after layer), divided and masked in place as
    ``scale_and_mask`` does it, its α written into ``alpha`` (this layer's slice of every layer's α)
    and its summaries taken while it is in the cache, as the streamed path takes them. No layer
    allocates a T x T tensor of its own. α and z equal ``attend``'s up to the order of the float
    sums over the keys (the same keys, fewer masked ones). ``options``: a decoder layer's
    (``LlamaShape.options``: column layout, its scaling, mask, RoPE, window and soft-cap).
    """
    from ...kernel.summaries import TOP_K, LayerSums, row_stats

    o = options
    q, k, v, rope, qk_norm = queries_keys_values(x, p, o, past=past)  # (h, n, d_k), (g, P + n, .)
    heads, n, d_k = q.shape  # heads, new tokens, head size
    T_k = k.size(-2)  # the cached keys and the new ones
    P = T_k - n  # cached positions before the new rows
    k_per_head, v_per_head = repeat_kv(k, heads), repeat_kv(v, heads)  # (h, T_k, .): head i uses K/V i // (h/g)
    if o.similarity == "cosine":  # the dot product of unit vectors: normalised once, not per block
        q, k_per_head = F.normalize(q, dim=-1), F.normalize(k_per_head, dim=-1)
    keys_t = k_per_head.transpose(-2, -1)  # (h, d_k, T_k)
    context_vec = q.new_empty(heads, n, v.size(-1))  # z (h, n, d_v)
    sums = LayerSums(heads, n, T_k, q.device, torch.float32 if q.dtype != torch.float64 else q.dtype) \
        if summaries is not None else None
    rows = max(1, min(n, scratch.numel() // (2 * heads * T_k)))  # ω and α of a block fit in ``scratch``
    for start in range(0, n, rows):
        progress.check()  # a window's Esc stops a long sentence within a block of rows
        end = min(n, start + rows)
        # causal: these rows see keys before ``seen`` at most (k top keys: k at least); else every key
        seen = min(T_k, max(P + end, TOP_K)) if o.causal else T_k
        size = (heads, end - start, seen)
        count = math.prod(size)
        omega = torch.matmul(q[:, start:end], keys_t[..., :seen], out=scratch[:count].view(size))  # ω
        scaled = scaled_scores(omega, o, d_k, row_start=P + start, in_place=True)  # ω′, masked -inf
        capped, block = score_weights(scaled, o, out=scratch[count:2 * count].view(size))  # α
        alpha[:, start:end, :seen] = block
        alpha[:, start:end, seen:] = 0.0
        context_vec[:, start:end] = block @ v_per_head[:, :seen]  # z (h, rows, d_v)
        if sums is not None:
            hidden = masked_keys(P + start, end - start, seen, o.causal, o.window, o.sink_tokens, x.device)
            sums.add(row_stats(block, start, hidden, causal=o.causal, width=T_k,
                               scores=scaled if capped is None else capped), start)  # the softmax's input, overwritten
    if z_hook is not None:
        context_vec = z_hook(context_vec)  # an intervention (ablation, patching)
    concat, output = project_outputs(context_vec, p, "column")  # (n, h d_v), (n, d) with b_O
    if summaries is not None and sums is not None:
        summaries.append(sums.finish())
    return Steps(q, k, v, context_vec, concat, output, weights=alpha, rope=rope, qk_norm=qk_norm)


def kept_scratch(heads: int, n: int, T_k: int, element_size: int = 4, block_bytes: int = KEPT_BLOCK_BYTES) -> int:
    """The elements of ``kept_attention``'s scratch for n new rows over T_k keys: ω and α of its largest block."""
    rows = max(1, min(n, block_bytes // (2 * heads * T_k * element_size)))
    return 2 * heads * rows * T_k


def layer_pieces(h: torch.Tensor, w: dict, layer: int, shape: LlamaShape,
                 past: tuple[torch.Tensor, torch.Tensor] | None = None, *, z_hook=None,
                 reduce_to: int | None = None, block_bytes: int = 8 * 2**20, shown: bool = False,
                 into: tuple[torch.Tensor, torch.Tensor, list | None] | None = None) -> LayerPieces:
    """One layer over the new rows ``h`` (n, d), wired as ``BLOCKS[shape.block]`` says, every piece named.

    ``reduce_to``: attention streamed by blocks of query rows of about ``block_bytes`` (``attend``);
    ``shown``: this layer's ω and scaled scores pooled too (``attend_summarised``).
    ``into``: (this layer's α (h, n, P + n) to fill, a flat scratch tensor of ``kept_scratch``'s size, a list
    to append the layer's summaries to, or None): only α, q, k, v, z and the output are made
    (``kept_attention``), as a model run keeps them."""
    p = f"model.layers.{layer}"
    block = BLOCKS[shape.block]
    x = h if block.attn_norm is None else norm(h, w, f"{p}.{block.attn_norm}", shape)  # X: what attention reads
    options = shape.options(layer)
    if reduce_to is not None:  # streamed: no T x T map kept (softcap refused where streaming is: engine.plan)
        steps = attend_summarised(x, head_weights(w, layer, shape, True), options, Stream(reduce_to, block_bytes),
                                  shown=shown, z_hook=z_hook)
    elif into is not None:
        alpha, scratch, summaries = into
        steps = kept_attention(x, head_weights(w, layer, shape, True), alpha, scratch, options, past=past,
                               z_hook=z_hook, summaries=summaries)
    else:
        steps = attend(x, head_weights(w, layer, shape, True), options, past=past, z_hook=z_hook)
    attn_write = steps.output if block.attn_post is None else norm(steps.output, w, f"{p}.{block.attn_post}", shape)
    mid = h + attn_write
    mlp_reads = h if block.parallel else mid
    mlp_in = mlp_reads if block.mlp_norm is None else norm(mlp_reads, w, f"{p}.{block.mlp_norm}", shape)
    mlp_out = feed_forward(mlp_in, w, layer, shape)
    mlp_write = mlp_out if block.mlp_post is None else norm(mlp_out, w, f"{p}.{block.mlp_post}", shape)
    return LayerPieces(h, x, steps, attn_write, mid, mlp_in, mlp_out, mlp_write, mid + mlp_write)


def decoder_layer(h: torch.Tensor, w: dict, layer: int, shape: LlamaShape,
                  past: tuple[torch.Tensor, torch.Tensor] | None = None, **kwargs
                  ) -> tuple[torch.Tensor, torch.Tensor, Steps]:
    """``layer_pieces``' (next residual, X, attention steps)."""
    pieces = layer_pieces(h, w, layer, shape, past, **kwargs)
    return pieces.resid_post, pieces.attn_in, pieces.steps


def embed(w: dict, ids: torch.Tensor, shape: LlamaShape, start: int = 0) -> torch.Tensor:
    """What a layer-0 residual starts as: the token embedding of ``ids`` (..., n), times √d for Gemma, plus GPT-2's
    learned positions counted from ``start``.  -> (..., n, d)"""
    h = rows(w, "model.embed_tokens.weight", ids.reshape(-1)).unflatten(0, ids.shape)  # a GGUF reads rows of ids
    if shape.embed_scale:  # Gemma: the embedding times √d
        h = h * h.new_tensor(h.shape[-1] ** 0.5)
    if "model.embed_positions.weight" in w:  # learned absolute positions (GPT-2)
        n = ids.shape[-1]
        h = h + rows(w, "model.embed_positions.weight", torch.arange(start, start + n, device=ids.device))
    return h


def forward(w: dict, ids: torch.Tensor, shape: LlamaShape, cache: KVCache | None = None, *,
            z_hooks: dict | None = None, reduce_to: int | None = None, block_bytes: int = 8 * 2**20,
            shown_layer: int | None = None) -> Forward:
    """Run the model on the new token ids (n,), after the ``cache`` of the tokens before (if any).

    ``reduce_to`` streams every layer's attention (no cache): each layer's T x T maps are made a
    block of query rows at a time (about ``block_bytes`` of scores), kept only pooled to
    ``reduce_to`` per side and summed into the summaries; memory then follows T, not T².
    Streamed, ``shown_layer``'s steps are kept whole (``Forward.shown``), its ω and scaled scores pooled too.

    Learned positions (GPT-2's ``model.embed_positions.weight``) are added to the token
    embedding, counted from the cache's length. Only the last row's logits are computed
    (``logits``), as the next token needs no others. ``z_hooks`` maps a layer (0-based) to a function of its per-head
    outputs Z (h, n, d_v) returning what W_O reads instead (``engine.interventions``). ``Run`` is the same pass
    run a layer at a time.
    """
    return Run(w, ids, shape, cache, z_hooks=z_hooks, reduce_to=reduce_to, block_bytes=block_bytes,
               shown_layer=shown_layer).finish()


class Run:
    """``forward``'s pass, a layer at a time: ``advance(to)`` runs the layers before ``to`` from the kept residual,
    ``input_of(layer)`` gives what a layer's attention reads having run only the layers before it, ``finish()``
    runs the rest, the final norm and the logits and gives the ``Forward``.

    ``done`` counts the layers run. A layer's results are kept only once it has run whole: a layer stopped
    midway (an exception, Ctrl+C, a window's cancel: ``engine.progress``) leaves the run as it was before it, and
    ``advance`` goes on from there. Each layer run reports to the thread's watch (``progress.at(done, total)``,
    which may raise ``Cancelled`` between layers; ``progress.check`` within one, per block of rows). Not
    thread-safe: one thread advances a run at a time.
    """

    def __init__(self, w: dict, ids: torch.Tensor, shape: LlamaShape, cache: KVCache | None = None, *,
                 z_hooks: dict | None = None, reduce_to: int | None = None, block_bytes: int = 8 * 2**20,
                 shown_layer: int | None = None):
        if reduce_to is not None and cache is not None:
            raise ValueError("a run after a key/value cache is not streamed")
        h = embed(w, ids, shape, 0 if cache is None else cache.length)  # (n, d)
        self.w, self.shape, self.cache, self.z_hooks = w, shape, cache, z_hooks or {}
        self.reduce_to, self.block_bytes, self.shown_layer = reduce_to, block_bytes, shown_layer
        self.h = h  # the residual entering layer ``done``
        self.done = 0
        self.residual: list[torch.Tensor] = [h]  # the residual entering each layer run (not kept streamed)
        self.inputs: list[torch.Tensor] = []  # each layer's X
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.maps: list[torch.Tensor] = []  # streamed: each layer's pooled α
        self.last: list[torch.Tensor] = []  # each layer's α of the last query row
        self.sums: list[dict[str, torch.Tensor]] = []  # every layer's summaries
        self.alphas: torch.Tensor | None = None  # every layer's α, filled layer by layer (``kept_attention``)
        self.into: list[tuple[torch.Tensor, torch.Tensor, list | None] | None] = [None] * shape.layers
        if reduce_to is None:
            n = ids.shape[0]
            T_k = n + (0 if cache is None else cache.length)
            self.alphas = h.new_empty(shape.layers, shape.heads, n, T_k)
            scratch = h.new_empty(kept_scratch(shape.heads, n, T_k, h.element_size()))  # one block's ω and α
            # a whole sentence: its summaries (a decode step's one row has none)
            self.into = [(alpha, scratch, self.sums if cache is None else None) for alpha in self.alphas]
        self.kept: tuple[int, Steps] | None = None  # the shown layer and its steps, streamed
        self.result: Forward | None = None  # ``finish``'s, once made

    def advance(self, to: int) -> None:
        """Run the layers ``done`` … ``to`` - 1 (none if ``to`` <= ``done``)."""
        shape, reduce_to = self.shape, self.reduce_to
        if self.done < min(to, shape.layers):
            progress.at(self.done, shape.layers)  # a window's compute thread: its bar, its Esc (engine.progress)
        for layer in range(self.done, min(to, shape.layers)):
            summed = len(self.sums)
            past = None if self.cache is None else (self.cache.keys[layer], self.cache.values[layer])
            try:
                h, x, steps = decoder_layer(self.h, self.w, layer, shape, past, z_hook=self.z_hooks.get(layer),
                                            reduce_to=reduce_to, block_bytes=self.block_bytes,
                                            shown=reduce_to is not None and layer == self.shown_layer,
                                            into=self.into[layer])
            except BaseException:
                del self.sums[summed:]  # this layer's summaries, appended before it stopped
                raise
            if reduce_to is not None and layer == self.shown_layer:
                self.kept = (layer, steps)
            if reduce_to is None:  # streamed, only the last residual is kept (memory follows T d, not L T d)
                self.residual.append(h)
                self.last.append(steps.alpha[:, -1])  # the summaries went into ``sums`` (``kept_attention``)
            else:
                pooled = steps.pooled
                assert pooled is not None and pooled.summaries is not None and pooled.last_row is not None
                self.sums.append({name: pooled.summaries[name] for name in SUMMARY_PARTS})
                self.maps.append(pooled.maps["weights"])  # (h, r, r)
                self.last.append(pooled.last_row)
            self.inputs.append(x)
            self.keys.append(steps.k)  # (g, P + n, d_k): the cache and the new keys
            self.values.append(steps.v)
            self.h, self.done = h, layer + 1
            progress.at(self.done, shape.layers)  # after the layer is kept: a cancel here leaves it resumable

    def input_of(self, layer: int) -> torch.Tensor:
        """What layer ``layer``'s attention reads (X (n, d)): kept where that layer has run, else made after running
        the layers before it only (the norm of the kept residual; OLMo 2's is the residual itself)."""
        if layer < self.done:
            return self.inputs[layer]
        self.advance(layer)
        s, block = self.shape, BLOCKS[self.shape.block]
        return self.h if block.attn_norm is None else norm(self.h, self.w, f"model.layers.{layer}.{block.attn_norm}", s)

    def finish(self) -> Forward:
        """Run the layers left, the final norm and the logits: the whole pass's ``Forward`` (made once)."""
        if self.result is not None:
            return self.result
        self.advance(self.shape.layers)
        w, shape, reduce_to = self.w, self.shape, self.reduce_to
        final = norm(self.h, w, "model.norm", shape)  # (n, d)
        residual = [final] if reduce_to is not None else [*self.residual[:-1], final]  # the last: after the norm
        T_k = self.keys[0].size(-2)
        summaries = Summaries.stack(self.sums, T_k, self.maps if reduce_to is not None else None) \
            if self.sums else None
        self.result = Forward(residual, self.inputs, self.alphas, KVCache(tuple(self.keys), tuple(self.values)),
                              logits(final[-1], w, shape.final_softcap), summaries, torch.stack(self.last), self.kept)
        return self.result


SUMMARY_PARTS = ("sink", "distance", "decay", "top_weights", "top_keys",
                 *(f"metric_{name}" for name in ("entropy", "entropy_norm", "max_weight", "sink", "previous", "self",
                                                 "distance")))


def logits(last: torch.Tensor, w: dict, softcap: float | None = None) -> torch.Tensor:
    """The next-token logits of final-normed rows ``last`` (..., d): ``lm_head.weight``, else the tied embedding;
    soft-capped, c tanh(logits / c), with ``softcap`` (Gemma 2's final_logit_softcapping)."""
    out = stored.logits(last, w, "lm_head.weight" if "lm_head.weight" in w else "model.embed_tokens.weight")
    return out if softcap is None else torch.tanh(out / softcap) * softcap

