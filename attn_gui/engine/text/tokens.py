"""Tokenizers: turn a sentence into tokens, ids and a sorted vocabulary."""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass

import torch

from ..base.errors import ConfigError


TOKENIZERS = ("word", "char")


@dataclass(frozen=True)
class Tokens:
    """A tokenized sentence.

    Attributes
    ----------
    tokens : tuple of str
        The T tokens in sentence order.
    token_ids : tuple of int
        Index of each token in ``vocab``; repeated tokens share one id.
    vocab : tuple of str
        The V distinct tokens, sorted (as the tutorials build their dictionary).
    """

    tokens: tuple[str, ...]
    token_ids: tuple[int, ...]
    vocab: tuple[str, ...]

    def id_tensor(self) -> torch.Tensor:
        """``token_ids`` as a (T,) long CPU tensor, made once (again if changed in place)."""
        ids = self.__dict__.get("_ids")
        if ids is None or ids._version != 0:
            ids = torch.tensor(self.token_ids, dtype=torch.long)
            object.__setattr__(self, "_ids", ids)  # a cache, not a field: equality is unchanged
        return ids

    def joined(self, other: Tokens) -> Tokens:
        """These tokens followed by ``other``'s, with one vocabulary for both (sorted, as ``tokenize`` makes it).

        Cross-attention draws X for both sentences at once this way, so a word in both has one row.
        """
        tokens = self.tokens + other.tokens
        vocab = tuple(sorted(set(tokens)))
        index = {tok: i for i, tok in enumerate(vocab)}
        return Tokens(tokens, tuple(index[t] for t in tokens), vocab)


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def _is_control(ch: str) -> bool:
    # Cc (controls), Cf (format: zero-width spaces, BOM), Cs/Co/Cn (surrogates, private, unassigned)
    return unicodedata.category(ch).startswith("C")


def split_words(sentence: str) -> list[str]:
    """Split on whitespace, strip surrounding punctuation, drop empties, keep case.

    Control and format characters count as whitespace, so pasted text with tabs,
    zero-width spaces or stray escape codes still splits into readable words.
    Words in any script (and emoji) are kept as they are.
    """
    cleaned = "".join(" " if _is_control(ch) else ch for ch in sentence)
    words = []
    for raw in cleaned.split():
        start, end = 0, len(raw)
        while start < end and _is_punct(raw[start]):
            start += 1
        while end > start and _is_punct(raw[end - 1]):
            end -= 1
        if start < end:
            words.append(raw[start:end])
    return words


def split_chars(sentence: str) -> list[str]:
    """Every character is a token; runs of whitespace become one space, controls are dropped."""
    out: list[str] = []
    for ch in sentence.strip():
        if ch.isspace():
            if out and out[-1] != " ":
                out.append(" ")
        elif not _is_control(ch):
            out.append(ch)
    return out


@functools.lru_cache(maxsize=64)
def tokenize(sentence: str, tokenizer: str = "word") -> Tokens:
    """Tokenize ``sentence`` with the named tokenizer ("word" or "char").

    The vocabulary is the sorted set of tokens, so
    "Life is short, eat dessert first" gives
    ``('Life', 'dessert', 'eat', 'first', 'is', 'short')``.
    """
    if tokenizer == "word":
        tokens = split_words(sentence)
    elif tokenizer == "char":
        tokens = split_chars(sentence)
    else:
        raise ConfigError(f"tokenizer must be one of {', '.join(TOKENIZERS)}; got {tokenizer!r:.40}")
    vocab = tuple(sorted(set(tokens)))
    index = {tok: i for i, tok in enumerate(vocab)}
    return Tokens(tuple(tokens), tuple(index[t] for t in tokens), vocab)
