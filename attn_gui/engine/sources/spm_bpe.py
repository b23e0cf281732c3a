"""SentencePiece's BPE (Llama 2, TinyLlama, Mistral) built from a GGUF file's vocabulary and scores.

A GGUF of ``tokenizer.ggml.model`` "llama" stores the pieces ("▁the": "▁" stands for a space),
one score per piece and the 256 byte pieces ``<0x00>`` … ``<0xFF>``, usually without merges.
``build_tokenizer`` makes the ``tokenizers`` object that transformers makes from the same
metadata (``integrations/gguf/gguf_tokenizer_mapping.py: sentencepiece_tokenizer`` with
``LlamaTokenizer``'s BPE with byte fallback, its Metaspace pre-tokenizer and decoder; the
merges recovered from the scores as ``generate_merges`` recovers them), so the ids are the
same; the tests compare the two. A character outside the vocabulary becomes its UTF-8 bytes.
"""

from __future__ import annotations

import re

from .byte_bpe import CONTROL, USER_DEFINED, merge_pairs, shown

SPACE = "\u2581"  # "▁", the piece's spelling of a space
_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def merges_from_scores(vocab: dict[str, int], scores: dict[str, float]) -> list[tuple[str, str]]:
    """The merges a vocabulary implies: every split of a piece into two pieces of the vocabulary,
    the piece's score its rank (best first; ties: longer left, then longer right part first)."""
    merges = []
    for piece, score in scores.items():
        found = [(piece[:k], piece[k:], score) for k in range(1, len(piece))
                 if piece[:k] in vocab and piece[k:] in vocab]
        found.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges.extend(found)
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(a, b) for a, b, _ in merges]


def build_tokenizer(tokens: list[str], token_types: list[int], scores: list[float], merges: list[str] | None = None,
                    add_prefix_space: bool = True, special_ids=()):
    """The ``tokenizers.Tokenizer`` of a GGUF's SentencePiece vocabulary.

    Parameters
    ----------
    tokens, token_types, scores : lists, one entry per id
        ``tokenizer.ggml.tokens``, ``.token_type`` (3: control, special; 4: user-defined,
        matched whole) and ``.scores``.
    merges : list of str, optional
        ``tokenizer.ggml.merges`` where the file has them; else recovered from the scores.
    add_prefix_space : bool
        ``tokenizer.ggml.add_space_prefix``: a space is put before the text (SentencePiece's default).
    special_ids : iterable of int
        Further special tokens: the file's bos, eos, unknown and padding ids.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    vocab = {t: i for i, t in enumerate(tokens)}
    scored = dict(zip(tokens, scores, strict=False))
    pairs = merge_pairs(merges) if merges else merges_from_scores(vocab, scored)
    tok = Tokenizer(BPE(vocab=vocab, merges=pairs, fuse_unk=True, byte_fallback=True, dropout=None))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first" if add_prefix_space
                                                 else "never", split=False)
    steps = [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    if add_prefix_space:
        steps.append(decoders.Strip(content=" ", left=1, right=0))
    tok.decoder = decoders.Sequence(steps)
    extra = {tokens[i] for i in special_ids if 0 <= i < len(tokens)}
    typed = list(zip(tokens, token_types, strict=False))
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t, kind in typed
                            if kind == CONTROL or t in extra])
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t, kind in typed if kind == USER_DEFINED])
    tok.no_truncation()
    tok.no_padding()
    return tok


def readable(token: str, special: bool = False) -> str:
    """What a person is shown for a piece: "▁" as "␣", a byte piece ``<0xE6>`` as the byte
    (``\\xe6`` where it is only part of a character, "↵" for ``<0x0A>``); special ones as they are."""
    if special:
        return token
    byte = _BYTE.fullmatch(token)
    if byte:
        return shown(bytes([int(byte.group(1), 16)]))
    return shown(token.replace(SPACE, " ").encode("utf-8"))
