"""Byte-level BPE (GPT-2's scheme) built from a GGUF file's vocabulary and merges.

A GGUF carries no ``tokenizer.json``: its vocabulary, merges and token types are metadata.
``build_tokenizer`` makes the ``tokenizers`` object that transformers makes from the same
metadata (``integrations/gguf/gguf_tokenizer_mapping.py: byte_level_tokenizer`` then
``add_gguf_special_tokens`` and ``set_split_regex``, with ``GPT2Tokenizer``'s BPE model,
pre-tokenizer and decoder), so the ids are the same; the tests compare the two. The text is
split before the merges as the file's ``tokenizer.ggml.pre`` says: Qwen2's and Llama 3's
regular expressions (``SPLITS``), GPT-2's for any other (SmolLM2's "smollm").

Byte-level tokens spell every byte as a printable character (a space is "Ġ", a newline
"Ċ", the two bytes of "é" are "Ã©"). People see ``readable(token)`` instead: the token's
bytes decoded as UTF-8, a space shown as "␣", a newline as "↵", a tab as "⇥", and a byte
that is only part of a character (the three bytes of 漢 may fall into different tokens)
as ``\\xe6``.
"""

from __future__ import annotations

import functools
import unicodedata

CONTROL = 3  # llama.cpp's token type of a special token such as <|im_start|>
USER_DEFINED = 4  # an added token that is not special (Qwen2's <tool_call>): matched whole, never split
SHOWN = {" ": "␣", "\n": "↵", "\t": "⇥"}
# tokenizer.ggml.pre -> the regular expression that splits the text before the merges (as the
# models' tokenizer.json files split it); any other value: GPT-2's, the ByteLevel pre-tokenizer's own
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_LLAMA3 = _QWEN2.replace(r"\p{N}|", r"\p{N}{1,3}|")  # digits in threes
SPLITS = {"qwen2": _QWEN2, "deepseek-r1-qwen": _QWEN2,
          "llama3": _LLAMA3, "llama-v3": _LLAMA3, "llama-bpe": _LLAMA3, "smaug-bpe": _LLAMA3, "dbrx": _LLAMA3}


@functools.cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte to the printable character that spells it in the vocabulary.

    Printable Latin-1 bytes stand for themselves; the other 68 take the characters from
    U+0100 on, in byte order (space, byte 32, becomes "Ġ", U+0120).
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, chars), strict=True))


@functools.cache
def unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in bytes_to_unicode().items()}


def merge_pairs(merges: list[str]) -> list[tuple[str, str]]:
    """GGUF's merges, "a b" each, as BPE's (a, b) pairs."""
    return [(a, b) for a, _, b in (m.partition(" ") for m in merges)]


def spelled(token: str) -> str:
    """``token`` in the byte alphabet: itself, or (a token stored as plain text) its UTF-8 bytes spelled."""
    alphabet = unicode_to_bytes()
    if all(c in alphabet for c in token):
        return token
    spelling = bytes_to_unicode()
    return "".join(spelling[b] for b in token.encode("utf-8"))


def build_tokenizer(tokens: list[str], token_types: list[int], merges: list[str], pre: str | None = None,
                    special_ids=()):
    """The ``tokenizers.Tokenizer`` of a GGUF's byte-level BPE vocabulary.

    Parameters
    ----------
    tokens : list of str
        ``tokenizer.ggml.tokens``: token i has id i.
    token_types : list of int
        ``tokenizer.ggml.token_type``: control tokens (3) become special tokens, matched
        whole in the text and never split; user-defined ones (4) added tokens, also matched whole.
    merges : list of str
        ``tokenizer.ggml.merges``, "a b" each, best first.
    pre : str, optional
        ``tokenizer.ggml.pre``: which regular expression splits the text first (``SPLITS``).
    special_ids : iterable of int
        Further special tokens: the file's bos, eos, unknown and padding ids.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    vocab = {spelled(t): i for i, t in enumerate(tokens)}
    pairs = merge_pairs(merges)
    tok = Tokenizer(BPE(vocab=vocab, merges=pairs, dropout=None, continuing_subword_prefix="",
                        end_of_word_suffix="", fuse_unk=False))
    if pre in SPLITS:
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(SPLITS[pre]), behavior="isolated"),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # GPT-2's split regex, then bytes
    tok.decoder = decoders.ByteLevel()
    alphabet = unicode_to_bytes()
    extra = {tokens[i] for i in special_ids if 0 <= i < len(tokens)}
    special = [AddedToken(t, normalized=False, special=True) for t, kind in zip(tokens, token_types, strict=False)
               if (kind == CONTROL or t in extra) and all(c in alphabet for c in t)]
    tok.add_special_tokens(special)
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t, kind in zip(tokens, token_types, strict=False)
                    if kind == USER_DEFINED and t in vocab])
    tok.no_truncation()
    tok.no_padding()
    return tok


def token_bytes(token: str) -> bytes:
    """The bytes a byte-level token stands for (a special token: its own text)."""
    table = unicode_to_bytes()
    return bytes(table[c] for c in token) if all(c in table for c in token) else token.encode("utf-8")


def readable(token: str, special: bool = False) -> str:
    """What a person is shown for ``token``: its text, spaces as "␣", partial characters as ``\\xNN``.

    Special tokens (``<|im_start|>``) are shown as they are.
    """
    if special:
        return token
    return shown(token_bytes(token))


def shown(raw: bytes) -> str:
    """Bytes as a person reads them: UTF-8 text, spaces as "␣", newlines "↵", tabs "⇥", other
    control characters and bytes that are only part of a character escaped (``\\xe6``)."""
    text = raw.decode("utf-8", errors="backslashreplace")
    return "".join(SHOWN.get(c) or (repr(c)[1:-1] if unicodedata.category(c).startswith("C") else c) for c in text)
