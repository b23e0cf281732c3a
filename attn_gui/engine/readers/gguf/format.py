"""GGUF, llama.cpp's file format: the header (metadata and each tensor's name, type, shape and place) read
without reading any tensor's data (``read_header``).
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass
from typing import overload
from pathlib import Path

from ...specs.families import Family, gguf_family


MAGIC = b"GGUF"
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_NUMPY = {0: "u1", 1: "i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8", 12: "<f8"}
STRING, ARRAY = 8, 9
FLOATS = {0: "F32", 1: "F16", 30: "BF16"}  # ggml types kept as they are; any other is dequantized to float32


@dataclass(frozen=True)
class Tensor:
    """One tensor's entry in the header."""

    name: str
    shape: tuple[int, ...]  # torch's order, rows first (ggml lists the dimensions innermost first)
    kind: int  # its ggml type (0 F32, 1 F16, 2 Q4_0 …)
    start: int  # its first byte in the file
    nbytes: int | None  # None where the ``gguf`` package is missing to say how a type is laid out


@dataclass(frozen=True)
class Header:
    """A GGUF's metadata (string arrays only where asked for) and its tensors' entries, in file order."""

    path: Path
    fields: dict
    tensors: dict[str, Tensor]
    size: int  # the file's bytes

    def get(self, key: str, default=None):
        return self.fields.get(key, default)

    def arch_key(self, key: str, default=None):
        """``{architecture}.{key}`` ("llama.block_count")."""
        return self.fields.get(f"{self.fields.get('general.architecture')}.{key}", default)

    @property
    def family(self) -> Family | None:
        """The family (``families.FAMILIES``) of its ``general.architecture``; None for one not read here."""
        return gguf_family(str(self.get("general.architecture")), str(self.get("general.name", "")))


class _Cursor:
    """Little-endian values read in order from a buffer; running past its end raises ValueError."""

    def __init__(self, buffer):
        self.buffer, self.pos = buffer, 0

    def take(self, code: str):
        try:
            (value,) = struct.unpack_from("<" + code, self.buffer, self.pos)
        except struct.error:
            raise ValueError(f"the header ends early (at byte {self.pos})") from None
        self.pos += struct.calcsize(code)
        return value

    def skip(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > len(self.buffer):
            raise ValueError(f"the header ends early (at byte {start})")
        self.pos += n
        return start

    @overload
    def string(self) -> str: ...
    @overload
    def string(self, keep: bool) -> str | None: ...

    def string(self, keep: bool = True) -> str | None:
        n = self.take("Q")
        start = self.skip(n)
        return self.buffer[start:self.pos].decode("utf-8", errors="replace") if keep else None

    def value(self, kind: int, keep: bool = True):
        import numpy as np

        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == STRING:
            return self.string(keep)
        if kind != ARRAY:
            raise ValueError(f"unknown value type {kind}")
        item, count = self.take("I"), self.take("Q")
        if item in _NUMPY:
            dtype = np.dtype(_NUMPY[item])
            start = self.skip(count * dtype.itemsize)
            return np.frombuffer(self.buffer, dtype, count, start).copy()  # a copy: the buffer is closed after
        if count > (len(self.buffer) - self.pos) // 8:  # every item takes 8 bytes at least
            raise ValueError(f"an array of {count} items runs past the end of the file")
        items = [self.value(item, keep) for _ in range(count)]
        return items if keep else None


def read_header(path: Path, arrays: tuple[str, ...] = ("tokenizer.ggml.tokens",)) -> Header:
    """The header of the GGUF at ``path``; string arrays are kept only for the keys in ``arrays``
    (the merges of a large vocabulary take a while to decode). Raises ValueError (with the
    reason) for a file that is not a GGUF or ends before its header or tensors do, OSError where
    it cannot be read.
    """
    size = path.stat().st_size
    with open(path, "rb") as f:
        if f.read(4) != MAGIC:
            raise ValueError("it does not start with GGUF")
        if size < 24:
            raise ValueError(f"{size} bytes are too few for a GGUF header")
        buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with buffer:
        cursor = _Cursor(buffer)
        cursor.pos = 4
        version = cursor.take("I")
        if version not in (2, 3):
            raise ValueError(f"GGUF version {version} is not read here (2 and 3 are; a big-endian file is not)")
        n_tensors, n_fields = cursor.take("Q"), cursor.take("Q")
        if n_tensors > size or n_fields > size:
            raise ValueError("its counts of tensors and fields are corrupt")
        fields = {}
        for _ in range(n_fields):
            key = cursor.string()
            kind = cursor.take("I")
            fields[key] = cursor.value(kind, keep=kind != ARRAY or key in arrays)
        entries = []
        for _ in range(n_tensors):
            name = cursor.string()
            n_dims = cursor.take("I")
            if n_dims > 8:
                raise ValueError(f"{name} has {n_dims} dimensions")
            dims = [cursor.take("Q") for _ in range(n_dims)]
            kind, offset = cursor.take("I"), cursor.take("Q")
            entries.append((name, tuple(reversed(dims)), kind, offset))
    alignment = int(fields.get("general.alignment", 32) or 32)
    data_start = -(-cursor.pos // alignment) * alignment
    tensors = {}
    for name, shape, kind, offset in entries:
        nbytes = _nbytes(shape, kind)
        start = data_start + offset
        if nbytes is not None and start + nbytes > size:
            raise ValueError(f"it is truncated: {name} ends at byte {start + nbytes:,} of {size:,}")
        tensors[name] = Tensor(name, shape, kind, start, nbytes)
    return Header(path, fields, tensors, size)


def _nbytes(shape: tuple[int, ...], kind: int) -> int | None:
    """The bytes of a tensor of ``shape`` and ggml type ``kind``; None without the ``gguf`` package."""
    try:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    except ImportError:
        return None
    try:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    except (ValueError, KeyError):
        raise ValueError(f"its tensors have an unknown type {kind}") from None
    if shape and shape[-1] % block:
        raise ValueError(f"a row of {shape[-1]} values is not whole blocks of {block}")
    return math.prod(shape) // block * size


def is_gguf(path: str) -> bool:
    """Whether a model path names a GGUF file (by its name: nothing is opened)."""
    return path.lower().endswith(".gguf")


def eps_key(family: Family) -> str:
    """The metadata key of the norms' epsilon: LayerNorm's (GPT-NeoX) or RMSNorm's."""
    return "attention.layer_norm_epsilon" if family.norm == "layer" else "attention.layer_norm_rms_epsilon"
