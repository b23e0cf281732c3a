"""compute(config) -> AttentionResult: draw the inputs and weights, run every step, keep them all."""

from __future__ import annotations

import dataclasses
import math
import time

import torch

from ..kernel.attend import attend
from ..kernel.project import sinusoidal_positions
from ..kernel.types import AttendOptions, Pooled, Projections, Rotary, Steps, Stream
from ..config.config import BFLOAT16_NOTE, AttentionConfig
from ..model.plan import Plan, plan
from ..base.devices import DTYPES, free_bytes, resolve_device, synchronize
from ..base.errors import DeviceError, TooLargeError
from .draws import draw_parameters, weights_on
from .inputs import check_tokens, source_tokens_for, unknown_note
from ..model.hooks import ablation_hooks
from ..model.wiring import hook_name
from ..text.tokens import Tokens

from .memory import CHECK_FREE_ABOVE, _block_bytes, _human, estimate_bytes
from .result import AttentionResult, CrossInputs, ModelRun

# bfloat16: a decoder's weight matmuls in bfloat16, the rest in float32 (model.decoder.source.compute_dtypes)


# Attention computes h T x T scores. With the maps streamed (``display_max``) memory follows
# T, not T^2 (about 0.5 GiB at 32,768 tokens and 8 heads of 64), but the time does not: past
# these lengths one compute takes minutes on a CPU, so the limit is stated instead. A full
# compute is further bounded by the memory free on the device (``estimate_bytes``).
MAX_TOKENS = {"cpu": 32768, "cuda": 32768, "mps": 8192}

# A model run that is not streamed keeps every layer's T x T alpha: past this length it streams instead.
FULL_MODEL_MAX = 4096


def compute(config: AttentionConfig, display_max: int | None = None, *, first: bool = False) -> AttentionResult:
    """Run self-attention for ``config`` and return every intermediate.

    The model is resolved once (``engine.model.plan.plan``); the result carries the plan (``AttentionResult.plan``).

    Parameters
    ----------
    config : AttentionConfig
    display_max : int, optional
        When T exceeds it (random weights), stream: compute the T x T fields head by head
        and block by block of query rows, and keep them only pooled to at most
        display_max x display_max (``reduce_matrix``'s values); the result's ``scores``,
        ``scaled`` and ``weights`` are then None and ``shown`` holds them. Memory then
        follows T instead of T^2. Without it (or at T <= display_max) every field is kept in full.
    first : bool
        A decoder model (not streamed, no ablation): the shown layer's maps as soon as the layers before it
        have run, nothing more (``ModelRun.pending``: no next tokens, no other layer's α, no summaries). The
        run is kept: ``compute(config)`` then runs the rest from the kept residual, and another layer inside
        what has run costs no layer at all.

    Raises
    ------
    ConfigError
        The sentence has no tokens, or more than the model reads; a layer or head the model lacks; a what-if
        option this path cannot run (``Plan.check``).
    ModelUnavailable
        Model mode, and the model is not installed.
    DeviceError
        The device is absent, gone away or out of memory.
    TooLargeError
        The estimate exceeds the memory free on the device (checked before allocating).
    """
    p = plan(config)
    device = resolve_device(config.device)
    toks = check_tokens(config, p)
    source = source_tokens_for(config)
    heads = p.dims.heads
    T, limit = len(toks.tokens), MAX_TOKENS[device.type]
    if T > limit:
        raise TooLargeError(f"T = {T:,} tokens is over the limit of {limit:,} on {device.type} "
                            f"(attention computes {heads} × T × T scores; past it one compute takes minutes)")
    reduce_to = p.reduce_to(T, display_max)
    if p.spec is not None and reduce_to is None and T > FULL_MODEL_MAX:
        raise TooLargeError(f"T = {T:,} tokens: {p.spec.label} keeps every layer's T × T alpha "
                            f"up to {FULL_MODEL_MAX} tokens; longer inputs are streamed (display_max)")
    p.check(streamed=p.spec is not None and reduce_to is not None)
    if source is not None and len(source.tokens) > limit:
        raise TooLargeError(f"the second sentence has T_k = {len(source.tokens):,} tokens, over the limit of "
                            f"{limit:,} on {device.type}")
    need = estimate_bytes(config, display_max, p)
    free = free_bytes(device) if need > CHECK_FREE_ABOVE else None
    if free is not None and need > 0.8 * free:
        raise TooLargeError(
            f"T = {T:,} with {heads} head(s) and these sizes needs about {_human(need)}; "
            f"{config.device} has {_human(free)} free"
        )
    try:
        return _compute(p, toks, source, device, reduce_to, first)
    except torch.cuda.OutOfMemoryError as exc:
        raise DeviceError(f"{config.device} ran out of memory ({_human(need)} needed)") from exc
    except MemoryError as exc:
        raise TooLargeError(f"out of memory: T = {T:,} with {heads} head(s) needs about {_human(need)}") from exc
    except RuntimeError as exc:
        if "DefaultCPUAllocator" in str(exc):  # torch's CPU allocator failed: say so with the estimate
            raise TooLargeError(f"out of memory: T = {T:,} with {heads} head(s) needs about {_human(need)}; "
                                f"the CPU could not allocate it") from exc
        if device.type != "cpu" and not isinstance(exc, DeviceError):
            raise DeviceError(f"{config.device} failed: {str(exc).splitlines()[0]}") from exc
        raise


def _compute(p: Plan, toks: Tokens, source: Tokens | None, device: torch.device,
             reduce_to: int | None, first: bool = False) -> AttentionResult:
    config = p.config
    dtype = DTYPES[config.dtype]
    start = time.perf_counter()
    if p.can.captured:
        return _captured(p, toks, device, dtype, start)
    x_source, ids = None, toks.id_tensor()
    run: ModelRun | None = None
    ready: Steps | None = None  # the shown layer's steps, made by a streamed model run
    vocab = toks.vocab
    if p.spec is None:
        x, x_source, weights, both = _random_inputs(config, toks, source, device, dtype)
        ids, vocab = both.id_tensor(), both.vocab  # cross-attention: ids in one vocabulary for both sentences
        options = p.shown
        notes = []
    else:
        x, weights, run, options, ready = _model_inputs(p, toks, device, dtype, reduce_to, first)
        unknown = unknown_note(config, toks, p)
        notes = [*([unknown] if unknown else []), *([p.what_if_text()] if p.what_if else []), *p.spec.about,
                 *([BFLOAT16_NOTE] if config.dtype == "bfloat16" else [])]  # the arithmetic that drew every α
    stream = None if reduce_to is None else Stream(reduce_to, _block_bytes(device))
    steps = ready if ready is not None else attend(
        x, weights, options, x_kv=x_source, stream=stream,
        z_hook=ablation_hooks(config.ablate).get(hook_name(config.layer, "attn.z")) if config.model else None)
    synchronize(device)
    elapsed_ms = (time.perf_counter() - start) * 1e3

    if p.spec is None and not _scores_finite(steps, config):
        notes.append("some scores are not finite (overflow in this dtype); their weights are not defined")
    T = len(toks.tokens)
    cross = None if source is None or x_source is None else CrossInputs(source.tokens, ids[T:].to(device), x_source)
    return AttentionResult(
        recompute=compute,
        config=config,
        tokens=toks.tokens,
        token_ids=(ids if source is None else ids[:T]).to(device),
        vocab=vocab,
        x=x,
        projections=weights,
        elapsed_ms=elapsed_ms,
        device=str(device),
        notes=tuple(notes),
        cross=cross,
        model_run=run,
        plan=p,
        **{f.name: getattr(steps, f.name) for f in dataclasses.fields(Steps)},  # attend's steps, by the same names
    )


def _captured(p: Plan, toks: Tokens, device: torch.device, dtype: torch.dtype, start: float) -> AttentionResult:
    """Model ``name`` read through transformers (``model.interop.via_transformers``): the steps its hooks captured,
    None for the others (named in ``not_captured``); attn-gui computes none of them."""
    from ..model.interop.via_transformers import captured

    config, spec, name = p.config, p.spec, p.config.model
    assert spec is not None and name is not None  # model mode
    ids = toks.id_tensor()
    steps, layer_weights, missing = captured(name, ids, config.layer, device, dtype)
    next_tokens = p.source.next_tokens(ids, device, dtype)
    synchronize(device)
    unknown = unknown_note(config, toks, p)
    q_unrotated, k_unrotated = steps.get("q_unrotated"), steps.get("k_unrotated")  # RoPE's, where captured
    rope = None if q_unrotated is None and k_unrotated is None else Rotary(q_unrotated, k_unrotated)
    return AttentionResult(
        recompute=compute,
        config=config, tokens=toks.tokens, token_ids=ids.to(device), vocab=toks.vocab, projections=Projections(),
        elapsed_ms=(time.perf_counter() - start) * 1e3, device=str(device),
        notes=(*([unknown] if unknown else []), *spec.about),
        model_run=ModelRun(layer_weights, next_tokens, not_captured=missing), x=steps.get("x"),
        rope=rope, q=steps.get("q"), k=steps.get("k"), v=steps.get("v"), scores=steps.get("scores"),
        scaled=steps.get("scaled"), weights=steps.get("weights"),
        head_outputs=steps.get("head_outputs"), concat=steps.get("concat"), output=steps.get("output"), plan=p)


def _scores_finite(steps: Steps, config: AttentionConfig) -> bool:
    """Whether every score is finite: by a bound first, scanning the scores only when it fails.

    |q_i . k_j| <= d_k max|q| max|k|, and a cosine is at most 1 when q and k are finite.
    """
    q, k = steps.q, steps.k
    q_range, k_range = torch.aminmax(q), torch.aminmax(k)  # one pass each, no |q| made
    lo_q, hi_q, lo_k, hi_k = torch.stack([*q_range, *k_range]).tolist()  # one copy to the host
    big = [max(-lo_q, hi_q), max(-lo_k, hi_k)]  # max |q|, max |k| (NaN compares false: caught below)
    if any(math.isnan(v) for v in (lo_q, hi_q, lo_k, hi_k)):
        big = [math.nan, math.nan]
    d_k = q.shape[-1]
    bound = 1.0 if config.similarity == "cosine" else d_k * big[0] * big[1]
    if math.isfinite(big[0]) and math.isfinite(big[1]) and bound < torch.finfo(q.dtype).max / 2:
        return True
    scores = steps.scores
    if scores is None:  # streamed: the pooled scores keep the extremes
        assert steps.pooled is not None
        scores = steps.pooled.maps["scores"]
    return bool(torch.isfinite(torch.stack(torch.aminmax(scores))).all())


def _random_inputs(config: AttentionConfig, toks: Tokens, source: Tokens | None, device: torch.device,
                   dtype: torch.dtype):
    """X (T, d), the second sentence's X_src (T_k, d) or None, the seeded projections on ``device`` in the
    config's layout (shared, not copied), and the tokens X was drawn for.

    Cross-attention draws X once for both sentences, one after the other (one vocabulary), and
    splits it, so X_src comes from the same draw as X whatever ``inputs`` says.
    """
    both = toks if source is None else toks.joined(source)
    x, *params = draw_parameters(config, both)
    x = x.to(device=device, dtype=dtype)
    T = len(toks.tokens)
    parts = [x[:T]] if source is None else [x[:T], x[T:]]  # (T, d), (T_k, d)
    if config.positional == "sinusoidal":  # each sentence from position_offset on
        parts = [part + sinusoidal_positions(part.size(0), part.size(1), dtype=dtype, device=device,
                                               offset=config.position_offset) for part in parts]
    x_source = parts[1] if source is not None else None
    return parts[0], x_source, Projections(*weights_on(tuple(params), device, dtype)), both


def _model_inputs(p: Plan, toks: Tokens, device: torch.device, dtype: torch.dtype, reduce_to: int | None,
                  first: bool = False
                  ) -> tuple[torch.Tensor, Projections, ModelRun, AttendOptions, Steps | None]:
    """What the shown layer reads, its projections, the run's every layer's weights (None when streamed:
    ``reduce_to``), next tokens (or None) and summaries (a decoder's; None for an encoder), the options
    its attention runs with (the plan's, with what only the loaded model holds: DeBERTa's position terms,
    ``ModelSource.layer_options``), and the shown layer's steps where a streamed run made them (else None).

    Every layer runs with the plan's options (``Plan.layers``: the model's own, or a what-if in every layer),
    so the shown layer, the model view and the next tokens all come from one forward. ``first``: a decoder's X of
    the shown layer only, having run the layers before it (``compute``); the run is kept for a later compute."""
    config, model, layers = p.config, p.source, p.layers
    ids = toks.id_tensor()
    summaries = None
    made: tuple[int, Steps] | None = None  # streamed: the shown layer and its steps, as the run made them
    if first and reduce_to is None and not config.ablate and p.can.decoder:
        x, done = _decoder(p).first_input(ids, device, dtype, config.layer, layers)  # the layers before it
        if done < len(p.layers):  # else the whole run is there: given whole, below
            options = model.layer_options(p.shown, config.layer, len(toks.tokens), device, dtype)
            weights = model.layer_weights(config.layer, device, dtype)  # column layout
            shown = weights.transposed() if config.layout == "row" else weights
            return x, shown, ModelRun(pending=done), options, None
    if config.ablate:  # every layer above a struck head reads a changed residual stream, and so does the next token
        decoder = _decoder(p)
        run = decoder.forward(ids, device, dtype, hooks=ablation_hooks(config.ablate), reduce_to=reduce_to,
                              shown_layer=config.layer, layers=layers)
        hidden, layer_weights, next_tokens = run.inputs, run.weights, decoder.top_tokens(run.logits)
        summaries = run.summaries
        made = run.shown
    elif reduce_to is not None:  # streamed (a decoder, ``Capabilities.stream``): no layer keeps its T x T maps
        decoder = _decoder(p)
        run = decoder.streamed_inputs(ids, device, dtype, reduce_to, _block_bytes(device), config.layer, layers)
        hidden, layer_weights, summaries = [*run.inputs, run.residual[-1]], None, run.summaries
        next_tokens = decoder.top_tokens(run.logits)
        made = run.shown
    else:
        hidden, layer_weights = model.layer_inputs(ids, device, dtype, layers)
        next_tokens = model.next_tokens(ids, device, dtype, layers=layers)
        if p.can.decoder:  # a decoder's, from its kept run
            summaries = _decoder(p).summaries(ids, device, dtype, layers)
    weights = model.layer_weights(config.layer, device, dtype)  # column layout
    if config.layout == "row":  # show W as d x d_k (q = x W): the same numbers, transposed
        weights = weights.transposed()
    options = model.layer_options(p.shown, config.layer, len(toks.tokens), device, dtype)
    ready = None  # the shown layer's steps as the run made them (streamed: the same plan)
    if made is not None and made[0] == config.layer and made[1].pooled is not None:
        ready = _streamed_steps(made[1])
    return hidden[config.layer], weights, ModelRun(layer_weights, next_tokens, summaries), options, ready


def _decoder(p: Plan):
    """The plan's source as a decoder (``model.decoder.source.Source``)."""
    from ..model.decoder.source import Source as DecoderSource

    model = p.source
    assert isinstance(model, DecoderSource)  # the plan streams and ablates decoders only
    return model


def _streamed_steps(made: Steps) -> Steps:
    """``attend(..., stream=)``'s steps from a streamed layer's (``attention.attend_summarised(shown=True)``):
    the same fields, its pooled maps and each row's largest α."""
    kept = made.pooled
    assert kept is not None and kept.row_max is not None  # attend_summarised(shown=True) pools all three
    maps = {name: kept.maps[name] for name in ("scores", "scaled", "weights")}
    return dataclasses.replace(made, pooled=Pooled(maps, row_max=kept.row_max))
