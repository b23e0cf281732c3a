"""The tokens of a config: its model's in model mode, else the word or character tokenizer's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config.config import AttentionConfig
from ..base.errors import ConfigError
from ..model.plan import check_model, plan
from ..text.tokens import Tokens, tokenize

if TYPE_CHECKING:
    from ..model.plan import Plan


def _model(config: AttentionConfig, resolved: Plan | None):
    """The config's model source: the plan's where given (resolved once), else the config's plan's."""
    assert config.model is not None
    return (resolved if resolved is not None else plan(config)).source


def tokens_for(config: AttentionConfig, resolved: Plan | None = None) -> Tokens:
    """The Tokens of ``config.sentence``: the model's tokens in model mode, else ours (both cached).
    ``resolved``: the config's plan, where the caller has made it.

    Raises
    ------
    ModelUnavailable
        In model mode, when the model's packages are not installed.
    """
    if config.model is not None:
        return _model(config, resolved).tokenize(config.sentence)
    return tokenize(config.sentence, config.tokenizer)


def source_tokens_for(config: AttentionConfig) -> Tokens | None:
    """The Tokens of the second sentence of a cross-attention config (``config.cross``), else None."""
    return tokenize(config.source_sentence, config.tokenizer) if config.cross else None


def check_tokens(config: AttentionConfig, resolved: Plan | None = None) -> Tokens:
    """The Tokens of ``config``, or ``ConfigError`` when there are none (in the sentence or a second
    sentence), more than the model reads, or fewer than the sink tokens.

    Cheap after the first call for a sentence (tokenizing is cached); ``compute`` calls it too, with its plan.
    """
    toks = tokens_for(config, resolved)
    if not toks.tokens:
        raise ConfigError("the sentence has no tokens: type at least one word")
    source = source_tokens_for(config)
    if source is not None and not source.tokens:
        raise ConfigError("the second sentence has no tokens: type at least one word, or empty it "
                          "for self-attention")
    if config.sink_tokens > len(toks.tokens):
        raise ConfigError(f"sink_tokens is {config.sink_tokens:,}, more than the {len(toks.tokens):,} tokens "
                          f"of the sentence")
    if config.model is not None:
        spec = (resolved if resolved is not None else plan(config)).facts
        if len(toks.tokens) > spec.max_tokens:
            raise ConfigError(f"{spec.label} reads at most {spec.max_tokens} tokens; "
                              f"this text has {len(toks.tokens):,}")
    return toks


def unknown_note(config: AttentionConfig, toks: Tokens, resolved: Plan | None = None) -> str | None:
    """A warning when most of ``toks`` (the tokens of ``config``'s sentence) are the model's unknown
    token: the maps then show one token repeated, not the sentence. None otherwise (and without a model).
    """
    if config.model is None:
        return None
    unknown = _model(config, resolved).unknown_token()
    count = toks.tokens.count(unknown) if unknown is not None else 0
    if 2 * count <= len(toks.tokens):
        return None
    return (f"{count} of the {len(toks.tokens)} tokens are the unknown token {unknown!r}: the model's "
            f"vocabulary lacks these words, so the maps show one token repeated; type words it knows")


def check_tokens_now(config: AttentionConfig) -> Tokens | None:
    """``check_tokens(config)`` when it is quick; None when the model must be loaded first.

    A window calls this on its GUI thread: loading a model (converting it, the first time)
    is left to its worker, which loads it and checks the tokens there (``compute`` does).
    A model that is not installed still raises ``ModelUnavailable`` at once.
    """
    if config.model is not None:
        check_model(config)  # a layer or a struck head the model lacks: refused before any loading
        model = plan(config).source
        if model.available() and not model.loaded():
            return None
    return check_tokens(config)
