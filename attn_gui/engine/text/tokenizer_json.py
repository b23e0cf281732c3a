"""What a folder's tokenizer.json says beyond its vocabulary: the tokens it adds around a text.

Apart from ``hf`` because both readers of a folder use it: ``hf`` (the models attn-gui runs) and
``via_transformers`` (the models transformers runs).
"""

from __future__ import annotations

from pathlib import Path

from ..base.disk import json_object
from ..base.errors import ConfigError


def special_tokens(folder: Path) -> tuple[str, ...]:
    """The tokens the tokenizer adds around a text ([CLS] … [SEP], <s> … </s>): those a view may hide.

    Read from tokenizer.json's post-processor; [UNK], [PAD] and [MASK] are left out, as an
    [UNK] in the maps stands for a typed word. Without a post-processor: the special added tokens.
    """
    data = json_object(folder / "tokenizer.json", f"{folder.name}/tokenizer.json")
    found = _added_by(data.get("post_processor") or {})
    if found:
        return tuple(dict.fromkeys(found))
    return tuple(t["content"] for t in data.get("added_tokens") or [] if t.get("special"))


def _added_by(processor: dict) -> list[str]:
    kind = processor.get("type")
    if kind == "TemplateProcessing":
        return list(processor.get("special_tokens") or {})
    if kind in ("BertProcessing", "RobertaProcessing"):  # cls and sep as [text, id]
        return [processor[k][0] for k in ("cls", "sep") if isinstance(processor.get(k), list)]
    if kind == "Sequence":
        return [t for p in processor.get("processors") or [] for t in _added_by(p)]
    return []


def added_tokens(tokenizer, folder: Path) -> tuple[int | None, int | None]:
    """The ids tokenizer.json's post-processor puts before and after the text, each or None: Llama-2's and
    Mistral's <s> first; an end token last where the tokenizer was saved with add_eos_token (transformers'
    ``update_post_processor``: "<s> $A </s>"). ``ConfigError`` where it adds anything else, which a decoder
    here never reads."""
    bare = tokenizer.encode("a b", add_special_tokens=False).ids
    full = tokenizer.encode("a b", add_special_tokens=True).ids
    n = len(bare)
    for first in (0, 1):
        last = len(full) - first - n
        if last in (0, 1) and full[first:first + n] == bare:
            return (full[0] if first else None), (full[-1] if last else None)
    raise ConfigError(f"{folder.name}: tokenizer.json's post_processor adds tokens other than one before and one "
                      f"after the text ({full} around {bare}); attn-gui's decoders read at most those")


def wrapped(ids: list[int], first: int | None, last: int | None) -> list[int]:
    """``ids`` with the tokens the tokenizer adds around a text: ``first`` before, ``last`` after (None: none)."""
    return [*([] if first is None else [first]), *ids, *([] if last is None else [last])]
