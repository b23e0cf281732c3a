"""SentencePiece's BPE (Llama 2, TinyLlama, Mistral) built from a GGUF file's vocabulary and scores.

A GGUF of ``tokenizer.ggml.model`` "llama" stores the pieces ("▁the": "▁" stands for a space),
one score per piece and the 256 byte pieces ``<0x00>`` … ``<0xFF>``, usually without merges.
``build_tokenizer`` makes a ``tokenizers`` object that splits a text as llama.cpp does
(``llama-vocab.cpp``, the SPM case of ``tokenize``): a space is put before every stretch of text,
the first and each one after a special or user-defined token, even one that already starts with a
space ("  the" is "▁▁▁the"). Llama 2's, TinyLlama's and Mistral's own tokenizer.json do the same
with a normalizer (transformers' ``LlamaConverter`` with ``legacy``: ``Prepend("▁")`` then
``Replace(" ", "▁")``, run on each stretch between added tokens), and so does transformers'
Phi-3 GGUF tokenizer; here too. transformers' ``LlamaTokenizer`` for a llama GGUF puts its
"▁" with a Metaspace pre-tokenizer (prepend "first") instead, so it differs in those two cases
only. The rest is as transformers builds it (``integrations/gguf/gguf_tokenizer_mapping.py``):
BPE with byte fallback, merges recovered from the scores as ``generate_merges`` recovers them
where the file has none, the same decoder. A character outside the vocabulary becomes its UTF-8
bytes.
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
        ``tokenizer.ggml.add_space_prefix``: a space is put before each stretch of text, as llama.cpp
        puts it (SentencePiece's default; Gemma's files say false).
    special_ids : iterable of int
        Further special tokens: the file's bos, eos, unknown and padding ids.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers
    from tokenizers.models import BPE

    vocab = {t: i for i, t in enumerate(tokens)}
    scored = dict(zip(tokens, scores, strict=False))
    pairs = merge_pairs(merges) if merges else merges_from_scores(vocab, scored)
    tok = Tokenizer(BPE(vocab=vocab, merges=pairs, fuse_unk=True, byte_fallback=True, dropout=None))
    # a normalizer, not a Metaspace: it runs on every stretch between added tokens and prepends even before a space
    prefix = [normalizers.Prepend(SPACE)] if add_prefix_space else []
    tok.normalizer = normalizers.Sequence([*prefix, normalizers.Replace(" ", SPACE)])
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
