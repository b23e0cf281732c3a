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

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from ...base import progress
from ...kernel.attend import attend
from ...kernel.blocks import attend_summarised, kept_attention, kept_scratch
from ...kernel.summaries import Summaries
from ...kernel.types import Steps, Stream
from ...specs.decoder import LlamaShape
from ...specs.wiring import BLOCKS
from ..wiring import Hook, HookCache, LayerPieces, at, check_hooks
from .parts import embed_parts, feed_forward, head_weights, logits, norm


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
    activations : HookCache, or None
        Kept (``forward(..., keep=True)``): every hook point by TransformerLens' name (``model.wiring``).

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
    activations: HookCache | None = None


def layer_pieces(h: torch.Tensor, w: dict, layer: int, shape: LlamaShape,
                 past: tuple[torch.Tensor, torch.Tensor] | None = None, *, hooks: Mapping[str, Hook] | None = None,
                 reduce_to: int | None = None, block_bytes: int = 8 * 2**20, shown: bool = False,
                 into: tuple[torch.Tensor, torch.Tensor, list | None] | None = None) -> LayerPieces:
    """One layer over the new rows ``h`` (n, d), wired as ``BLOCKS[shape.block]`` says, every piece named; each
    hook point of ``hooks`` (``model.wiring.HOOKABLE``, by TransformerLens' name) passes through its hook.

    ``reduce_to``: attention streamed by blocks of query rows of about ``block_bytes`` (``attend``);
    ``shown``: this layer's ω and scaled scores pooled too (``attend_summarised``).
    ``into``: (this layer's α (h, n, P + n) to fill, a flat scratch tensor of ``kept_scratch``'s size, a list
    to append the layer's summaries to, or None): only α, q, k, v, z and the output are made
    (``kept_attention``), as a model run keeps them."""
    p = f"model.layers.{layer}"
    block = BLOCKS[shape.block]
    h = at(hooks, layer, "resid_pre", h)
    x = h if block.attn_norm is None else norm(h, w, f"{p}.{block.attn_norm}", shape)  # X: what attention reads
    x = at(hooks, layer, "attn_in", x)
    z_hook = None if not hooks else hooks.get(f"blocks.{layer}.attn.hook_z")
    options = shape.options(layer)
    if reduce_to is not None:  # streamed: no T x T map kept (softcap refused where streaming is: engine.model.plan)
        steps = attend_summarised(x, head_weights(w, layer, shape, True), options, Stream(reduce_to, block_bytes),
                                  shown=shown, z_hook=z_hook)
    elif into is not None:
        alpha, scratch, summaries = into
        steps = kept_attention(x, head_weights(w, layer, shape, True), alpha, scratch, options, past=past,
                               z_hook=z_hook, summaries=summaries)
    else:
        steps = attend(x, head_weights(w, layer, shape, True), options, past=past, z_hook=z_hook)
    attn_write = steps.output if block.attn_post is None else norm(steps.output, w, f"{p}.{block.attn_post}", shape)
    attn_write = at(hooks, layer, "attn_out", attn_write)
    mid = at(hooks, layer, "resid_mid", h + attn_write)
    mlp_reads = h if block.parallel else mid
    mlp_in = mlp_reads if block.mlp_norm is None else norm(mlp_reads, w, f"{p}.{block.mlp_norm}", shape)
    mlp_in = at(hooks, layer, "mlp_in", mlp_in)
    mlp_out = feed_forward(mlp_in, w, layer, shape)
    mlp_write = mlp_out if block.mlp_post is None else norm(mlp_out, w, f"{p}.{block.mlp_post}", shape)
    mlp_write = at(hooks, layer, "mlp_out", mlp_write)
    post = at(hooks, layer, "resid_post", mid + mlp_write)
    return LayerPieces(h, x, steps, attn_write, mid, mlp_in, mlp_out, mlp_write, post)


def decoder_layer(h: torch.Tensor, w: dict, layer: int, shape: LlamaShape,
                  past: tuple[torch.Tensor, torch.Tensor] | None = None, **kwargs
                  ) -> tuple[torch.Tensor, torch.Tensor, Steps]:
    """``layer_pieces``' (next residual, X, attention steps)."""
    pieces = layer_pieces(h, w, layer, shape, past, **kwargs)
    return pieces.resid_post, pieces.attn_in, pieces.steps


def forward(w: dict, ids: torch.Tensor, shape: LlamaShape, cache: KVCache | None = None, *,
            hooks: Mapping[str, Hook] | None = None, keep: bool = False, reduce_to: int | None = None,
            block_bytes: int = 8 * 2**20, shown_layer: int | None = None) -> Forward:
    """Run the model on the new token ids (n,), after the ``cache`` of the tokens before (if any).

    ``hooks`` change the hook points they name (TransformerLens' names, ``model.wiring``: a head knocked out is a
    hook at ``blocks.{l}.attn.hook_z``); ``keep`` keeps every point, read by name in ``Forward.activations``
    (every layer's scores and α whole: the analyses' run, not the window's). Kept, ``ids`` may be a batch
    (B, n): every tensor gains the leading B axis.

    ``reduce_to`` streams every layer's attention (no cache): each layer's T x T maps are made a
    block of query rows at a time (about ``block_bytes`` of scores), kept only pooled to
    ``reduce_to`` per side and summed into the summaries; memory then follows T, not T².
    Streamed, ``shown_layer``'s steps are kept whole (``Forward.shown``), its ω and scaled scores pooled too.

    Learned positions (GPT-2's ``model.embed_positions.weight``) are added to the token
    embedding, counted from the cache's length. Only the last row's logits are computed
    (``logits``), as the next token needs no others. ``Run`` is the same pass run a layer at a time.
    """
    return Run(w, ids, shape, cache, hooks=hooks, keep=keep, reduce_to=reduce_to, block_bytes=block_bytes,
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
                 hooks: Mapping[str, Hook] | None = None, keep: bool = False, reduce_to: int | None = None,
                 block_bytes: int = 8 * 2**20, shown_layer: int | None = None):
        if reduce_to is not None and (cache is not None or keep):
            raise ValueError("a run after a key/value cache, or one keeping every point, is not streamed")
        if ids.dim() != 1 and not keep:
            raise ValueError("only a kept run reads a batch of token ids")
        check_hooks(hooks or {}, shape.layers)
        tokens, positions = embed_parts(w, ids, shape, 0 if cache is None else cache.length)
        h = tokens if positions is None else tokens + positions  # (n, d)
        self.w, self.shape, self.cache, self.hooks = w, shape, cache, dict(hooks or {})
        self.embedded = (tokens, positions) if keep else None  # the kept run's hook_embed and hook_pos_embed
        self.pieces: list[LayerPieces] = []  # kept: each layer's
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
        if reduce_to is None and not keep:
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
                pieces = layer_pieces(self.h, self.w, layer, shape, past, hooks=self.hooks, reduce_to=reduce_to,
                                      block_bytes=self.block_bytes,
                                      shown=reduce_to is not None and layer == self.shown_layer,
                                      into=self.into[layer])
            except BaseException:
                del self.sums[summed:]  # this layer's summaries, appended before it stopped
                raise
            h, x, steps = pieces.resid_post, pieces.attn_in, pieces.steps
            if self.embedded is not None:
                self.pieces.append(pieces)
            if reduce_to is not None and layer == self.shown_layer:
                self.kept = (layer, steps)
            if reduce_to is None:  # streamed, only the last residual is kept (memory follows T d, not L T d)
                self.residual.append(h)
                self.last.append(steps.alpha[..., -1, :])  # the summaries went into ``sums`` (``kept_attention``)
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
        alphas = self.alphas
        kept = None
        if self.embedded is not None:
            alphas = torch.stack([pieces.steps.alpha for pieces in self.pieces], -4)  # (..., L, h, n, P + n)
            kept = HookCache(*self.embedded, tuple(self.pieces), final)
        self.result = Forward(residual, self.inputs, alphas, KVCache(tuple(self.keys), tuple(self.values)),
                              logits(final[..., -1, :], w, shape.final_softcap), summaries,
                              torch.stack(self.last, -3), self.kept, kept)
        return self.result


SUMMARY_PARTS = ("sink", "distance", "decay", "top_weights", "top_keys",
                 *(f"metric_{name}" for name in ("entropy", "entropy_norm", "max_weight", "sink", "previous", "self",
                                                 "distance")))
