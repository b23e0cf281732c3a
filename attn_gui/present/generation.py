"""One greedy step of a decoder model, as the window's Generate control takes it (no Qt).

The window keeps text, not token ids: a step appends the most likely next token's text to
the sentence, and the new sentence is computed as any other (its maps are a new frame).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine import AttentionConfig
from ..engine.run.decoding import DecodeStep, Decoder


@dataclass(frozen=True)
class GenerationStep:
    """The sentence after one greedy step.

    Attributes
    ----------
    sentence : str
        ``config.sentence`` with the chosen token's decoded text appended (" Paris", not "␣Paris").
    step : DecodeStep
        The token, its probability and the step's time through the key/value cache.
    stopped : bool
        The token is the model's end-of-sequence token: generating further makes no sense.
    """

    sentence: str
    step: DecodeStep
    stopped: bool


def generate_step(config: AttentionConfig) -> GenerationStep:
    """Append the most likely next token to ``config.sentence`` (``config.model`` must be a decoder).

    Raises ``ConfigError`` for an encoder or random weights, or when the sequence is full.
    """
    decoder = Decoder(config, kept=True)  # the prefill the shown frame was made of, where still kept
    step = decoder.step()
    return GenerationStep(config.sentence + step.text, step, step.token_id == decoder.source.eos_id)
