"""Greedy decoding with a key/value cache: a decoder model's next tokens, one step at a time.

>>> from attn_gui.engine import AttentionConfig
>>> from attn_gui.engine.run.decoding import Decoder, generate
>>> config = AttentionConfig(sentence="The capital of France is", model="smollm2-135m")
>>> generate(config, 2).text
' Paris.'
>>> decoder = Decoder(config)          # the prefill: the whole sentence at once
>>> decoder.prefill.weights.shape      # every layer's alpha, (L, h, T, T)
torch.Size([30, 9, 5, 5])
>>> step = decoder.step()              # one token: its q, k, v only, against the cache
>>> step.token, round(step.probability, 2), step.weights.shape   # (L, h, P + 1)
('␣Paris', 0.77, torch.Size([30, 9, 6]))

The prefill runs the model over the sentence and keeps every layer's keys (after RoPE) and
values on the device. Each step appends the most likely token: it runs the model over that
one token, whose query attends to the cached keys and its own, and adds its key and value
to the cache. ``recompute()`` runs the whole sequence again without the cache, for
comparison (the tests check that both give the same logits and weights).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ..base.devices import DTYPES
from ..config.config import AttentionConfig
from ..base.devices import resolve_device, synchronize
from ..base.errors import ConfigError
from .inputs import check_tokens
from ..model.hooks import ablation_hooks
from ..model.plan import Planned, Request, as_plan
from ..model.decoder.forward import Forward
from ..text.tokens import Tokens

# Past this many tokens a whole-sequence run (the prefill, a recompute) is streamed: every layer's
# maps pooled to STREAM_SIDE per side and summarised, no L x h x T x T tensor kept.
FULL_MAX = 512
STREAM_SIDE = 384
MAX_STEPS = 512


@dataclass(frozen=True)
class DecodeStep:
    """One decoding step: the token chosen and how its query attended.

    Attributes
    ----------
    position : int
        The new token's position P (the cache held P tokens before it).
    token_id : int
    token : str
        Its readable text, as the maps show it ("␣Paris").
    text : str
        The text it adds to the continuation (" Paris").
    probability : float
        Its probability under the previous position's logits (the most likely: greedy).
    weights : (L, h, P + 1) tensor
        Every layer's and head's attention of the new query row against the cached keys and its own.
    next_tokens : tuple of (str, float)
        The five most likely tokens after it, highest first.
    elapsed_ms : float
        The step's time: one token through every layer with the cache.
    """

    position: int
    token_id: int
    token: str
    text: str
    probability: float
    weights: torch.Tensor
    next_tokens: tuple[tuple[str, float], ...]
    elapsed_ms: float



@dataclass(frozen=True)
class Generation:
    """A greedy continuation: the prompt's tokens, each step, and the text they add."""

    prompt: Tokens
    steps: tuple[DecodeStep, ...]
    text: str
    stopped: bool  # True when it ended at the model's end-of-sequence token


def decoder_source(request: Request) -> Planned:
    """The source of ``config.model`` as its plan runs it (``engine.model.plan.Planned``: every forward and decode step
    with the plan's layers, a what-if included), or ``ConfigError`` when it cannot generate
    (``Capabilities.generate``, ``Plan.refusal``)."""
    return as_plan(request).runner("generate")


class Decoder:
    """Step-by-step greedy decoding of ``config.sentence`` with ``config.model``'s key/value cache.

    Parameters
    ----------
    request : AttentionConfig or Plan
        Its sentence, model (a decoder), device and dtype are used (a config is planned once).
    kept : bool
        Take the prefill from the whole run the window's maps were made of, where it is still kept (the same
        forward: the plan's layers, no struck heads), instead of running the sentence again; its time is then
        not the prefill's (the KV cache dock, which shows that time, runs it).

    Attributes
    ----------
    prompt : Tokens
    prefill : Forward
        The run over the whole sentence: every layer's weights (L, h, T, T), the cache, logits; past
        ``FULL_MAX`` tokens streamed (``weights`` None: ``last_weights`` and ``summaries`` instead).
    token_ids : list of int
        The prompt's ids and every token appended since.
    steps : list of DecodeStep

    Raises
    ------
    ConfigError
        The model is not a decoder, or the sentence has no tokens or too many.
    ModelUnavailable
        The model is not installed.
    """

    def __init__(self, request: Request, kept: bool = False):
        p = as_plan(request)
        self.source = decoder_source(p)
        self.config = config = p.config
        self.prompt = check_tokens(config)
        self.device = resolve_device(config.device)
        self.dtype = DTYPES[config.dtype]
        self.token_ids = list(self.prompt.token_ids)
        self.hooks = ablation_hooks(config.ablate)  # the struck heads stay struck at every new token
        self.prefill = self._run(kept)
        self._last = self.prefill
        self.steps: list[DecodeStep] = []

    @property
    def cache(self):
        """The key/value cache of every token so far (``KVCache``: per layer (g, P, d_k) keys and values)."""
        return self._last.cache

    @property
    def logits(self) -> torch.Tensor:
        """The logits (V,) of the token after the last one."""
        return self._last.logits

    def next_tokens(self, k: int = 5) -> tuple[tuple[str, float], ...]:
        """The ``k`` most likely next tokens (readable text, probability), highest first."""
        return self.source.top_tokens(self.logits, k)

    def step(self) -> DecodeStep:
        """Append the most likely next token, computing only its row through the cache.

        Raises ``ConfigError`` when the sequence already holds the model's most tokens.
        """
        spec = self.source.spec
        if len(self.token_ids) >= spec.max_tokens:
            raise ConfigError(f"{spec.label} reads at most {spec.max_tokens} tokens here; the sequence is full")
        probs = torch.softmax(self.logits.double(), dim=-1)
        token_id = int(probs.argmax())
        start = time.perf_counter()
        run = self.source.forward(torch.tensor([token_id]), self.device, self.dtype, self.cache,
                                  hooks=self.hooks)
        synchronize(self.device)
        elapsed_ms = (time.perf_counter() - start) * 1e3
        position = len(self.token_ids)
        text = self.source.decode_text(self.token_ids[len(self.prompt.token_ids):] + [token_id])
        before = self.source.decode_text(self.token_ids[len(self.prompt.token_ids):])
        self.token_ids.append(token_id)
        self._last = run
        step = DecodeStep(position, token_id, self.source.token_text(token_id), text[len(before):],
                          float(probs[token_id]), run.weights[:, :, 0], self.next_tokens(), elapsed_ms)
        self.steps.append(step)
        return step

    def recompute(self) -> Forward:
        """The whole sequence so far run again from the start, without the cache (for comparison)."""
        return self._run()

    def _run(self, kept: bool = False):
        """The whole sequence so far, from the start: streamed past ``FULL_MAX`` tokens (no T x T map kept).
        ``kept``: the prefill, taken from the run the window's maps were made of where it is kept (the same
        forward: the plan's layers, no hooks), so a Generate step does not run the prompt again."""
        ids = torch.tensor(self.token_ids)
        long = len(self.token_ids) > FULL_MAX
        if kept and not long and not self.hooks:
            return self.source.prefilled(ids, self.device, self.dtype)
        return self.source.forward(ids, self.device, self.dtype, hooks=self.hooks,
                                   reduce_to=STREAM_SIDE if long else None)

    @property
    def text(self) -> str:
        """The continuation's text so far."""
        return self.source.decode_text(self.token_ids[len(self.prompt.token_ids):])


def check_steps(config: AttentionConfig, steps: int) -> None:
    """``ConfigError`` unless 1 <= steps <= MAX_STEPS and the prompt plus the steps fit the model."""
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise ConfigError(f"steps must be a whole number from 1 to {MAX_STEPS}; got {steps!r:.40}")
    spec = decoder_source(config).spec
    T = len(check_tokens(config).tokens)
    if T + steps > spec.max_tokens:
        raise ConfigError(f"{spec.label} reads at most {spec.max_tokens} tokens here: the sentence has {T}, "
                          f"so at most {spec.max_tokens - T} steps")


def generate(config: AttentionConfig, steps: int) -> Generation:
    """Greedy decoding of up to ``steps`` tokens after ``config.sentence``, through the cache.

    Stops early after the model's end-of-sequence token.
    """
    check_steps(config, steps)
    decoder = Decoder(config)
    stopped = False
    for _ in range(steps):
        if decoder.step().token_id == decoder.source.eos_id:
            stopped = True
            break
    return Generation(decoder.prompt, tuple(decoder.steps), decoder.text, stopped)
