"""The decoder's forward with every reader's input its own tensor: what edge attribution and edge patching run.

In the one decoder forward (``model.decoder.forward``) every reader of a layer reads the same residual. Here each reader
of the circuit graph (``graph.Graph``: a head's query, key and value inputs, an MLP's input, the logits) gets its own
copy of it, routed through the same functions as the forward: the layer's norm (``llama.norm``), the head's
projections, biases, q/k norms and RoPE (``attention.queries_keys_values``), the scores scaled, masked, capped and
turned into α in one place (``attention.scaled_scores``, ``score_weights``), the values (``attention.project``), Z_i
W_O,i (``attribution.head_writes``), the MLP (``llama.feed_forward``), the final norm and the unembedding
(``llama.logits``). A copy can be rebuilt with some writers' parts taken from another run (``Patch``): an edge
patched. With no copy changed the run is the one decoder forward itself (``model.decoder.forward``, kept), and the split
forward must give its logits (``check``).

The gradient with respect to each reader's input (``gradients``) comes from the one forward's backward: dm/dy at the
reader's own output y (a head's query and key before RoPE, its value, the MLP's normed input), back through the
projection, W^T dm/dy, and through the reader's own copy of the norm (its autograd).

Refused in one line: a norm after attention or after the MLP (Gemma 2 and 3's sandwich, OLMo 2), which mixes the
heads' writes before they reach the residual, so that no head's part of a reader's input is its own write.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...kernel.types import AttendOptions, Projections
from ...kernel.scores import alibi_slopes, attention_scores, scaled_scores, score_weights
from ...kernel.project import context_vectors, project, queries_keys_values
from ..attribution.trace import head_writes
from ...base.errors import ConfigError
from ...specs.wiring import BLOCKS
from ...specs.decoder import LlamaShape
from ...model.decoder.parts import embed, feed_forward, head_weights, logits, norm
from ...model.decoder.forward import forward
from ...model.wiring import hook_name
from .graph import Graph
from .tasks import Batch, metric_values

FINAL = "model.norm"


def refusal(shape: LlamaShape) -> str | None:
    """Why the circuit graph cannot split a decoder of ``shape`` (one line), or None where it can."""
    block = BLOCKS[shape.block]
    if block.attn_post is not None or block.mlp_post is not None:
        return ("a norm after attention and the MLP (Gemma 2 and 3's sandwich, OLMo 2) mixes the heads' writes "
                "before the residual, so no edge carries one head's write alone: circuits need each write added to "
                "the residual as it is")
    return None


@dataclass(frozen=True)
class Run:
    """One split forward over a batch of B prompts of n tokens.

    writes : (W, B, n, d), what each writer added (``Graph`` order), detached
    bases : (2 L + 1, B, n, d), the residual each layer's attention reads (2 l), its MLP reads (2 l + 1) and the
        logits read (last), as this run computed it with every reader unpatched, detached
    metric : (B,), each prompt's metric
    """

    writes: torch.Tensor
    bases: torch.Tensor
    metric: torch.Tensor


@dataclass(frozen=True)
class Patch:
    """Some edges taken from another run: a reader r reads Σ_u [keep u -> r] a[u] + [not kept] a_other[u].

    keep : (W, R) bool, the edges read from this run (edges outside ``Graph.allowed`` are ignored)
    other : Run, the run the other edges' writes come from (the corrupted prompts')
    """

    keep: torch.Tensor
    other: Run


class Split:
    """A decoder's weights and shape, run with every reader's input its own (``run``).

    ``w``, ``shape``: as ``Source.decoder(device, dtype)`` gives them (the plan's layers in ``shape``).
    """

    def __init__(self, w, shape: LlamaShape, metric: str):
        why = refusal(shape)
        if why is not None:
            raise ConfigError(why)
        self.w, self.shape, self.metric = w, shape, metric
        self.block = BLOCKS[shape.block]
        self.graph = Graph(shape.layers, shape.heads, shape.kv_heads, self.block.parallel)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """The embedding writer's part (B, n, d) of prompts ``ids`` (B, n)."""
        return embed(self.w, ids, self.shape)

    def run(self, first: torch.Tensor, batch: Batch, *, patch: Patch | None = None,
            start: tuple[int, Run] | None = None) -> Run:
        """The split forward from the embedding ``first`` (B, n, d) over ``batch``'s scored positions.

        patch : the edges taken from another run (None: every reader reads this run's residual, and the run is the
            one decoder forward's, ``_plain``)
        start : (layer, run): begin at that layer with ``run``'s writes and residual below it (``first`` unused);
            only edges into that layer and above may then be patched
        """
        if patch is None and start is None:
            return self._plain(first, batch)
        g, shape, w = self.graph, self.shape, self.w
        writes: list[torch.Tensor] = []
        bases: list[torch.Tensor] = []
        begin = 0
        if start is not None:
            begin, earlier = start
            writes = list(earlier.writes[:g.writers_before(begin)])
            bases = list(earlier.bases[:2 * begin])
            resid = earlier.bases[2 * begin]
        else:
            writes.append(first)
            resid = first
        for layer in range(begin, shape.layers):
            bases.append(resid.detach())
            readers = torch.arange(g.reader(layer, "q"), g.reader(layer, "mlp"))
            x = self._inputs(resid, readers, writes, patch, 2 * layer)
            attn = self.block.attn_norm
            if attn is not None:
                x = self._norm(x, f"model.layers.{layer}.{attn}")
            h, kv = shape.heads, shape.kv_heads
            p = head_weights(w, layer, shape)
            assert p.w_o is not None
            z = self._heads(x[:, :h], x[:, h:h + kv], x[:, h + kv:], p, shape.options(layer))
            head_parts = head_writes(z, p.w_o)  # (B, h, n, d)
            writes += list(head_parts.transpose(0, 1))
            mid = resid + head_parts.sum(1)
            if p.b_o is not None:  # W_O's bias belongs to no head: the residual carries it, every run alike
                mid = mid + p.b_o
            mlp_reads = resid if self.block.parallel else mid
            bases.append(mlp_reads.detach())
            mlp = torch.tensor([g.reader(layer, "mlp")])
            y = self._inputs(mlp_reads, mlp, writes, patch, 2 * layer + 1)[:, 0]
            if self.block.mlp_norm is not None:
                y = self._norm(y, f"model.layers.{layer}.{self.block.mlp_norm}")
            out = feed_forward(y, w, layer, shape)
            writes.append(out)
            resid = mid + out
        bases.append(resid.detach())
        final = self._inputs(resid, torch.tensor([g.logits]), writes, patch, 2 * shape.layers)
        return Run(torch.stack([part.detach() for part in writes]), torch.stack(bases),
                   self._metric(final[:, 0], batch).detach())

    def _plain(self, first: torch.Tensor, batch: Batch, outputs: list | None = None, rows: int | None = None) -> Run:
        """``run`` with every reader reading the residual as it is: the one decoder forward, kept (its hook points
        read by name), each head's write Z_i W_O,i taken from its steps. ``outputs``: each layer's readers' outputs
        (q and k before RoPE and the q/k norms, v, the MLP's normed input) are appended to it, then the final
        residual, and the run's metric keeps its graph (``gradients``). ``rows``: the writes of the first ``rows``
        prompts only (the others' are not made)."""
        start = {hook_name(0, "resid_pre"): lambda _: first}  # the run begins at ``first``, not at the ids' rows
        ids = torch.zeros(first.shape[:-1], dtype=torch.long, device=first.device)
        kept = forward(self.w, ids, self.shape, hooks=start, keep=True).activations  # the one decoder forward
        assert kept is not None  # a kept run
        some = slice(None) if rows is None else slice(0, rows)
        writes, bases, h = [first[some]], [], first
        for layer, pieces in enumerate(kept.pieces):
            steps = pieces.steps
            w_o = head_weights(self.w, layer, self.shape).w_o
            assert w_o is not None  # a decoder layer has every projection
            writes += list(head_writes(steps.head_outputs[some], w_o).transpose(0, 1))
            writes.append(pieces.mlp_write[some])
            bases += [h, h if self.block.parallel else pieces.resid_mid]
            if outputs is not None:
                if steps.rope is None and steps.qk_norm is not None:
                    raise ConfigError("q/k norms without RoPE keep no query before its norm: circuits cannot split "
                                      "this model's queries")
                outputs += [pieces.point("attn.q"), pieces.point("attn.k"), steps.v, pieces.mlp_in]
            h = pieces.resid_post
        bases.append(h)
        metric = self._metric(h, batch)
        if outputs is not None:
            outputs.append(h)
            return Run(torch.stack(writes).detach(), torch.stack(bases).detach(), metric)
        return Run(torch.stack(writes), torch.stack(bases), metric)

    def gradients(self, first: torch.Tensor, batch: Batch, points: int = 1) -> tuple[Run, torch.Tensor]:
        """The run from ``first`` (points B, n, d) and dm/d input_r of every reader r (R, B, n, d), m summed over
        the batch and over the ``points`` copies of it that ``first`` stacks (EAP-IG's points of the line, one
        after another): each reader's as if it alone read its copy of the residual. The run's writes are the
        first copy's; its bases and metric every copy's.

        One forward and one backward of the one decoder forward give dm/dy at each reader's own output y: a head's
        query and key before RoPE and the q/k norms, its value, the MLP's normed input, the final residual (which
        the logits alone read). A projection y = W x̂ + b hands W^T dm/dy to the normed input x̂ it reads; the norm
        hands that back to the residual through its own autograd (``llama.norm``), each reader's apart; the points'
        gradients are summed as each layer's are made.
        """
        g, shape = self.graph, self.shape
        size = first.size(0) // points  # B
        outputs: list[torch.Tensor] = []
        with torch.enable_grad():
            first = first.detach().requires_grad_()
            run = self._plain(first, batch if points == 1 else batch.repeat(points), outputs, size)
            found = torch.autograd.grad(run.metric.sum(), outputs, allow_unused=True, materialize_grads=True)

        def summed(t: torch.Tensor) -> torch.Tensor:  # (points B, ...) -> (B, ...), the points added
            return t if points == 1 else t.unflatten(0, (points, size)).sum(0)
        grads = torch.empty(g.n_readers, size, *first.shape[1:], dtype=first.dtype, device=first.device)
        for layer in range(shape.layers):
            gq, gk, gv, gm = found[4 * layer:4 * layer + 4]
            p = head_weights(self.w, layer, shape)
            assert p.w_q is not None and p.w_k is not None and p.w_v is not None
            normed = torch.cat([torch.einsum("bhnk,hkd->bhnd", gy, w) for gy, w in ((gq, p.w_q), (gk, p.w_k),
                                                                                     (gv, p.w_v))], 1)  # W^T dm/dy
            start = g.reader(layer, "q")
            grads[start:start + normed.size(1)] = summed(self._back_through_norm(
                run.bases[2 * layer], normed, self.block.attn_norm, layer)).transpose(0, 1)
            grads[g.reader(layer, "mlp")] = summed(self._back_through_norm(
                run.bases[2 * layer + 1], gm[:, None], self.block.mlp_norm, layer)[:, 0])
        grads[g.logits] = summed(found[-1])
        return Run(run.writes, run.bases, run.metric.detach()), grads

    def _back_through_norm(self, x: torch.Tensor, upstream: torch.Tensor, name: str | None, layer: int) -> torch.Tensor:
        """The gradient at the residual x (B, n, d) of each reader's copy of the norm ``name`` of layer ``layer``,
        given the gradient at each copy's output, upstream (B, R, n, d): RMSNorm's written out (its autograd, mapped
        over the readers, took 3 to 10 times as long), Gemma's and LayerNorm's through their autograd."""
        assert name is not None  # refused where a block reads the residual without a norm (``refusal``)
        prefix = f"model.layers.{layer}.{name}"
        if self.shape.norm == "rms":  # y = g x r, r = (mean x² + eps)^-1/2: dx = r g u - x r³ mean(g u x)
            r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.shape.eps)[:, None]  # (B, 1, n, 1)
            gu, x = upstream * self.w[prefix + ".weight"], x[:, None]  # (B, R, n, d), (B, 1, n, d)
            return (r * gu - x * r.pow(3) * (gu * x).mean(-1, keepdim=True)).to(upstream.dtype)
        back = torch.func.vjp(lambda h: norm(h, self.w, prefix, self.shape), x.detach())[1]  # Gemma's, LayerNorm
        (found,) = torch.vmap(back, in_dims=1, out_dims=1)(upstream)  # one copy per reader, the same norm
        return found

    def _metric(self, final: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Each prompt's metric (B,) from the residual the logits read (B, n, d), at its scored positions."""
        rows = final.gather(1, batch.positions[..., None].expand(-1, -1, final.size(-1)))  # (B, P, d)
        return metric_values(logits(norm(rows, self.w, FINAL, self.shape), self.w, self.shape.final_softcap), batch,
                             self.metric)

    def _norm(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        """The norm at ``prefix`` of readers' inputs; once where they are one residual seen by every reader."""
        if x.dim() == 4 and x.stride(1) == 0:  # every reader's input the same residual
            return norm(x[:, :1], self.w, prefix, self.shape).expand_as(x)
        return norm(x, self.w, prefix, self.shape)

    def _inputs(self, resid: torch.Tensor, readers: torch.Tensor, writes: list[torch.Tensor], patch: Patch | None,
                base: int) -> torch.Tensor:
        """The inputs (B, |readers|, n, d) of ``readers`` (indices of one layer), each its own tensor."""
        x = resid.unsqueeze(1).expand(-1, len(readers), -1, -1)
        return x if patch is None else self._patched(x, readers, writes, patch, base)

    def _patched(self, x: torch.Tensor, readers: torch.Tensor, writes: list[torch.Tensor], patch: Patch,
                 base: int) -> torch.Tensor:
        """``x`` with every edge not kept read from the other run: the residual less Σ (a[u] - a_other[u]) over
        the dropped edges, or the other run's residual plus it over the kept ones, whichever reads fewer writers."""
        count = len(writes)
        allowed = self.graph.allowed[:count, readers]
        keep = patch.keep[:count, readers].to(allowed.device) & allowed
        drop = allowed & ~keep
        kept_rows, dropped_rows = keep.any(1).nonzero()[:, 0], drop.any(1).nonzero()[:, 0]
        if len(kept_rows) < len(dropped_rows):
            rows, sign, out = kept_rows, 1.0, patch.other.bases[base].unsqueeze(1).expand_as(x)
            mask = keep[rows]
        else:
            rows, sign, out = dropped_rows, -1.0, x
            mask = drop[rows]
        if len(rows) == 0:
            return out
        diff = torch.stack([writes[int(u)] for u in rows]) - patch.other.writes[rows]  # (U, B, n, d)
        return out + sign * torch.einsum("ur,ubnd->brnd", mask.to(diff.dtype), diff)

    @staticmethod
    def _heads(xq: torch.Tensor, xk: torch.Tensor, xv: torch.Tensor, p: Projections,
               options: AttendOptions) -> torch.Tensor:
        """Each head's Z (B, h, n, d_v) from its own normed query input xq (B, h, n, d) and its key/value head's
        inputs xk, xv (B, g, n, d): one head's attention through the forward's functions, mapped over the heads
        (``torch.vmap``)."""
        assert p.w_q is not None and p.w_k is not None and p.w_v is not None
        heads, kv = p.w_q.size(0), p.w_k.size(0)
        if p.q_norm is not None and p.q_norm.numel() != p.w_q.size(1):
            raise ConfigError("a q/k norm over every head together (OLMo 2) joins the heads' queries: circuits "
                              "need each head's query its own")
        group = torch.arange(heads, device=xq.device) // (heads // kv)  # the key/value head each query head reads
        parts = {"w_q": p.w_q, "w_k": p.w_k[group], "w_v": p.w_v[group]}
        for name in ("b_q", "b_k", "b_v"):
            bias = getattr(p, name)
            if bias is not None:
                parts[name] = bias if name == "b_q" else bias[group]
        if options.alibi:
            parts["slope"] = alibi_slopes(heads, xq.dtype, xq.device)

        def one(xq_i, xk_i, xv_i, part):
            slope = part.pop("slope", None)
            w_v, b_v = part.pop("w_v"), part.pop("b_v", None)
            head = Projections(**{name: t[None] for name, t in part.items()}, w_v=w_v[None, :0],  # no values here:
                               b_v=None if b_v is None else b_v[None, :, :0],  # they read their own input below
                               q_norm=p.q_norm, k_norm=p.k_norm, norm_eps=p.norm_eps)
            q, k, _, _, _ = queries_keys_values(xq_i, head, options, x_kv=xk_i)  # (B, 1, n, d_k)
            v = project(xv_i, w_v[None], options.layout)  # (B, 1, n, d_v), as queries_keys_values makes it
            v = v if b_v is None else v + b_v[None]
            scaled = scaled_scores(attention_scores(q, k, options.similarity), options, q.size(-1),
                                   slopes=None if slope is None else slope[None])
            _, alpha = score_weights(scaled, options)
            return context_vectors(alpha, v)[:, 0]  # (B, n, d_v)
        return torch.vmap(one, in_dims=(1, 1, 1, 0), out_dims=1)(xq, xk[:, group], xv[:, group], parts)

    def check(self, ids: torch.Tensor, own: torch.Tensor, label: str) -> None:
        """Refuse (one line) a model whose forward this split does not reproduce: prompt ``ids`` (n,) through the
        split forward, every reader its own input (every edge kept), must give the model's next-token logits
        ``own`` (V,), and the one forward's too (relative 1e-4)."""
        n = ids.numel()
        one = Batch(ids[None], ids[None], torch.tensor([[n - 1]]), torch.zeros(1, 1, 1, dtype=torch.long),
                    torch.ones(1, 1, 1, dtype=torch.bool), torch.zeros(1, 1, 1, dtype=torch.long),
                    torch.zeros(1, 1, 1, dtype=torch.bool), (0,))
        with torch.no_grad():
            plain = self.run(self.embed(ids[None]), one)
            split = self.run(self.embed(ids[None]), one, patch=Patch(self.graph.allowed, plain))
        for run in (plain, split):
            mine = logits(norm(run.bases[-1][0, -1:], self.w, FINAL, self.shape), self.w, self.shape.final_softcap)[0]
            if float((mine - own).abs().max()) > 1e-4 * max(1.0, float(own.abs().max())):
                raise ConfigError(f"{label}'s forward has a step the circuit graph does not split (its logits "
                                  "differ from the split forward's): circuits are not available for it")
