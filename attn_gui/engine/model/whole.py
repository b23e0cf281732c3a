"""A model checked whole, before a window switches to it (issue 38): ``checks`` on every part at once.

Apart from ``checks`` because it reads the models (``hf``, ``gguf_file``), which call ``checks``.
"""

from __future__ import annotations

from pathlib import Path

from ..base.errors import ConfigError
from ..readers.checks import decoder_weights, token_ids, tokenizer_errors


class _Stored:
    """A tensor's entry in a GGUF header, as ``decoder_weights`` reads it: its shape only."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape


def model_whole(name: str) -> None:
    """Check model ``name`` (a folder or a .gguf file) whole now, as its first compute would read it.

    The window calls this before it switches to a model, so a model refused later, in the
    worker, never becomes the config nor enters Recent models. A folder is read as the compute
    reads it (memory-mapped: no weight is copied) and stays loaded; a GGUF's header gives every
    tensor's shape and its vocabulary is built, without converting a weight.
    """
    from ..readers.catalog import model_spec
    from .registry import source

    spec = model_spec(name)
    if spec.module != "gguf_file" or not name.lower().endswith(".gguf"):
        source(name).load()  # a folder (hf.read, encoder.read), checked as it is read; a bundled model
        return
    from ..readers.gguf.spec import checked_header, shape_of
    from ..readers.gguf.vocab import build_tokenizer
    from ..readers.gguf.tensors import converted_shapes
    from ..readers.gguf.format import read_header

    file = Path(name).expanduser()
    header = checked_header(file)
    shapes = {key: _Stored(size) for key, size in converted_shapes(header, spec).items()}  # fused ones split
    shape = shape_of(spec, header, 1e-6)  # the family's norms and MLP: the tensors its decoder reads
    decoder_weights(file.name, shapes, shape, spec.d_model)
    try:
        full = read_header(file, arrays=("tokenizer.ggml.tokens", "tokenizer.ggml.merges"))
    except (ValueError, OSError) as exc:
        raise ConfigError(f"{file.name} is not a readable GGUF file: {exc!s:.100}") from None
    with tokenizer_errors(f"{file.name}'s vocabulary"):
        tokenizer, _ = build_tokenizer(full)
    token_ids(file.name, tokenizer.get_vocab(with_added_tokens=True), shapes["model.embed_tokens.weight"].shape[0])
