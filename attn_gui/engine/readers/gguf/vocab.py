"""A GGUF's vocabulary: the tokenizer built from ``tokenizer.ggml.*`` (byte-level BPE for "gpt2",
SentencePiece BPE for "llama"), its special tokens and ids. Imports no torch: a child process runs
``vocabulary_at`` (``text.tokenizer_child``).
"""

from __future__ import annotations

from pathlib import Path

from ...base.errors import ConfigError
from .. import checks
from .format import Header, eps_key, read_header


TOKENIZERS = {"gpt2": "byte-level BPE", "llama": "SentencePiece BPE"}


def check_token_ids(file: str, header: Header) -> None:
    """``ConfigError`` in one line for a begin or end token id that is not one whole number (an array, a
    string), or one the tokenizer adds (``add_bos_token``, ``add_eos_token``) that is not a token of the
    vocabulary (no begin token at all is read as none added, as before); an id past the vocabulary that is
    never added is read as none, as llama.cpp reads it."""
    count = len(header.get("tokenizer.ggml.tokens"))
    adds = {"bos": header.get("tokenizer.ggml.add_bos_token"), "eos": header.get("tokenizer.ggml.add_eos_token")}
    if adds["bos"] is None:  # as ``vocabulary`` reads it: SentencePiece vocabularies add one by default
        adds["bos"] = header.get("tokenizer.ggml.model") == "llama"
    for kind in ("bos", "eos"):
        key = f"tokenizer.ggml.{kind}_token_id"
        value = header.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            said = f"an array of {len(value)}" if hasattr(value, "__len__") else f"a {type(value).__name__}"
            raise ConfigError(f"{file}: {key} is {said}, not one token id")
        if adds[kind] and not (0 <= value < count if value is not None else kind == "bos"):
            said = "true" if header.get(f"tokenizer.ggml.add_{kind}_token") else "absent, so true"
            raise ConfigError(f"{file} has tokenizer.ggml.add_{kind}_token = {said} and no "
                              f"{'begin' if kind == 'bos' else 'end'} token to add ({key} = {value}, of {count} "
                              f"tokens)")


def token_id(header: Header, kind: str) -> int:
    """``tokenizer.ggml.{kind}_token_id``, or -1 where it is absent or not a token of the vocabulary."""
    value = header.get(f"tokenizer.ggml.{kind}_token_id")
    count = len(header.get("tokenizer.ggml.tokens") or ())
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < count else -1


def special_ids(header: Header) -> list[int]:
    """The special tokens' ids: control tokens, and the bos, eos, unknown and padding ids."""
    types = header.get("tokenizer.ggml.token_type")
    ids = [] if types is None else [i for i, t in enumerate(types.tolist()) if t == 3]
    for key in ("bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id"):
        value = header.get(f"tokenizer.ggml.{key}")
        if isinstance(value, int) and value not in ids:
            ids.append(value)
    return ids


def special_tokens(header: Header) -> tuple[str, ...]:
    """The special tokens' texts (those a view may hide), as the tokenizer matches them."""
    from ...text.byte_bpe import unicode_to_bytes

    tokens = header.get("tokenizer.ggml.tokens") or []
    alphabet = unicode_to_bytes()
    byte_level = header.get("tokenizer.ggml.model") == "gpt2"
    found = [tokens[i] for i in sorted(special_ids(header)) if 0 <= i < len(tokens)]
    return tuple(dict.fromkeys(t for t in found if not byte_level or all(c in alphabet for c in t)))


def vocabulary_at(path: Path, progress) -> tuple[dict[str, str], dict]:
    """``vocabulary`` of the GGUF at ``path``: the job ``tokenizer_child.vocabulary_in_child`` runs."""
    return vocabulary(read_header(path), progress)


def vocabulary(header: Header, progress) -> tuple[dict[str, str], dict]:
    """``convert``'s parts: the tokenizer's JSON (as "tokenizer.json") and the facts; imports no torch."""
    family = header.family
    assert family is not None  # spec_for has refused a family not read here
    full = read_header(header.path, arrays=("tokenizer.ggml.tokens", "tokenizer.ggml.merges"))
    with checks.tokenizer_errors(f"{header.path.name}'s vocabulary"):
        tokenizer, kind = build_tokenizer(full)
    progress(1, 2)  # only once the vocabulary makes a tokenizer: a refused file prints its one line alone
    meta = header_facts(full)
    assert meta["tokenizer"] == kind
    progress(2, 2)
    return {"tokenizer.json": tokenizer.to_str()}, meta


def header_facts(header: Header) -> dict:
    """The facts the cache keeps, as the header says them (cheap: no tokenizer is built), so that a cache opened
    is checked against the file on every open (``load.load``): a cache edited and sealed again is rebuilt."""
    family = header.family
    assert family is not None  # spec_for has refused a family not read here
    field = header.get
    kind = field("tokenizer.ggml.model")
    add_bos = field("tokenizer.ggml.add_bos_token")
    return {"eps": float(header.arch_key(eps_key(family), 1e-6)),
            "eos_id": token_id(header, "eos"), "bos_id": token_id(header, "bos"),
            "add_bos": bool(kind == "llama" if add_bos is None else add_bos),  # as transformers and llama.cpp
            "add_eos": bool(field("tokenizer.ggml.add_eos_token")),  # llama.cpp: an end token after the text
            "special_ids": special_ids(header), "tokenizer": kind}


def build_tokenizer(header: Header):
    """The ``tokenizers.Tokenizer`` the file's vocabulary describes, and its kind ("gpt2" or "llama")."""
    kind = header.get("tokenizer.ggml.model")
    tokens = header.get("tokenizer.ggml.tokens")
    types = header.get("tokenizer.ggml.token_type")
    types = [1] * len(tokens) if types is None else [int(t) for t in types.tolist()]
    special = special_ids(header)
    if kind == "gpt2":
        from ...text.byte_bpe import build_tokenizer as byte_level

        return byte_level(tokens, types, header.get("tokenizer.ggml.merges") or [], header.get("tokenizer.ggml.pre"),
                          special), kind
    from ...text.spm_bpe import build_tokenizer as sentencepiece

    scores = header.get("tokenizer.ggml.scores")
    scores = [0.0] * len(tokens) if scores is None else scores.tolist()
    prefix = header.get("tokenizer.ggml.add_space_prefix")
    return sentencepiece(tokens, types, scores, header.get("tokenizer.ggml.merges"),
                         True if prefix is None else bool(prefix), special), kind
