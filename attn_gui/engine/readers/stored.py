"""A checkpoint's weights as stored: memory-mapped, each tensor converted only when it is read.

A model folder's safetensors files are mapped, not read (``mapped``): a tensor is a view of
the file in its stored dtype (float32, float16 or bfloat16), and the pages a forward touches
are the only ones in memory. ``Upcast`` hands the forward each weight on its device and in
its dtype at the moment it is read. Where the free memory allows (``keep_bytes``: half of
what is free when the first forward starts), each converted weight is kept, so later forwards
convert nothing: upcasting every weight on every forward took half of a 0.5 B model's forward
at T = 64 (``attn-gui bench``, model folder). Past that budget the weights left are converted
as each layer reads them and dropped after it: a bfloat16 checkpoint run in float32 then holds
one layer's float32 copy at a time, never the whole model twice. ``logits`` reads an output
matrix that is not kept (often the tied embedding, the largest tensor) in slices for the same
reason.

With bfloat16 matmuls (``Upcast.matmul``, the config's dtype "bfloat16") the forward's matrices
multiply the stored weights themselves (``matrix``, ``linear``): a bfloat16 folder's as mapped, x
rounded to bfloat16, nothing converted and nothing kept; a GGUF's packed (``quantized.Quantized.matrix``).
Every other read (``w[key]``: the shown layer's projections, attribution) is float32 as before.

``need_bytes`` is the memory a model folder needs to run: its weights on disk plus its
largest layer in float32; ``check_memory`` refuses a folder that needs more than is free,
before anything is mapped.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..base.errors import ConfigError
from . import heap
from . import packed
from .cache import parse_safetensors
from .quantized import ROW_READ, Quantized

ROWS = 8192  # rows of the output matrix converted at a time by ``logits``
LAYER = re.compile(r"layers?\.(\d+)\.|\.h\.(\d+)\.|^h\.(\d+)\.")  # a weight's layer, in every family's names


def mapped(files: list[Path]) -> dict[str, torch.Tensor]:
    """Every tensor of the safetensors ``files``, as views of the mapped files (stored dtype, no copy).

    Mapped copy-on-write (``mode="c"``): the views are writable as torch wants, a write would
    stay private to this process, and the file is never changed. Raises ValueError or
    KeyError (a bad header, offsets or dtype) and OSError (an unreadable or empty file).
    """
    heap.tune()  # temporaries reused from the heap, large converted weights mapped
    tensors = {}
    for file in files:
        tensors.update(parse_safetensors(np.memmap(file, dtype=np.uint8, mode="c")))
    return tensors


class Upcast(Mapping):
    """Stored weights read as ``device`` / ``dtype`` tensors, each converted when it is read.

    ``stored`` keeps the stored tensors (``logits`` slices them). A weight already on
    ``device`` in ``dtype`` is handed out as it is. A converted weight is kept (``kept``) while
    the converted weights kept so far fit in ``keep_bytes``; the next read hands the kept one
    out (the same values: the conversion is exact and done once).

    ``matmul`` bfloat16 (on the CPU): the forward's matrices multiply in bfloat16 on the stored
    weights themselves (``matrix``, ``linear``: a GGUF's 4-bit blocks packed for PyTorch's int4
    kernel, a bfloat16 folder's tensors as mapped), with no float32 copy of the model; a weight
    read as a tensor (``w[key]``: the shown layer's projections, attribution) is still
    ``dtype``, exact. None: every matmul in ``dtype``.
    """

    def __init__(self, stored: Mapping[str, torch.Tensor], device: str, dtype: torch.dtype, keep_bytes: int = 0,
                 matmul: torch.dtype | None = None):
        self.stored, self.device, self.dtype = stored, torch.device(device), dtype
        self.matmul = None if matmul == dtype else matmul
        self.kept: dict[str, torch.Tensor] = {}
        self.keep_bytes = keep_bytes  # what is left of the budget for converted weights kept

    def __getitem__(self, key: str) -> torch.Tensor:
        kept = self.kept.get(key)
        if kept is not None:
            return kept
        value = self.stored[key]
        out = value.to(device=self.device, dtype=self.dtype)
        if out is not value and self.fits(value):
            self.kept[key] = out
            self.keep_bytes -= out.nbytes
        return out

    def fits(self, value: torch.Tensor) -> bool:
        """Whether ``value`` converted fits in what is left of the budget."""
        return value.numel() * self.dtype.itemsize <= self.keep_bytes

    def __iter__(self):
        return iter(self.stored)

    def __len__(self) -> int:
        return len(self.stored)

    def __contains__(self, key) -> bool:  # Mapping's would convert the weight to answer
        return key in self.stored

    def rows(self, key: str, index: torch.Tensor) -> torch.Tensor:
        """Rows ``index`` of weight ``key`` (an embedding lookup), converting only those rows (none if kept)."""
        kept = self.kept.get(key)
        if kept is not None:
            return kept[index.to(kept.device)]
        return stored_rows(self.stored, key, index, self.matmul is None).to(device=self.device, dtype=self.dtype)


def stored_rows(stored: Mapping[str, torch.Tensor], key: str, index, keep: bool = True) -> torch.Tensor:
    """Rows ``index`` (ids or a slice) of stored weight ``key``; a mapping that reads its tensors on demand
    (a GGUF's, ``quantized.Quantized``, which keeps what it dequantizes itself where ``keep`` and its budget
    allow) reads only those rows."""
    if hasattr(stored, "rows"):
        return stored.rows(key, index, keep)
    matrix = stored[key]
    return matrix[index.to(matrix.device) if isinstance(index, torch.Tensor) else index]


KEEP_SHARE = 0.5  # of the memory free at the first forward: at most this much is kept as converted weights


def keep_budget() -> int:
    """The bytes of converted weights a CPU forward may keep: ``KEEP_SHARE`` of the free memory (none if unknown).

    The other half is left to the forward itself (every layer's attention weights at long T)
    and to the rest of the machine."""
    free = free_bytes()
    return 0 if free is None else int(free * KEEP_SHARE)


def weights_on(stored: Mapping[str, torch.Tensor], device: str, dtype: torch.dtype,
               matmul: torch.dtype | None = None) -> Mapping[str, torch.Tensor]:
    """The weights as a forward on ``device`` in ``dtype`` reads them.

    On the CPU they are converted as each layer reads them (``Upcast``; no copy at all where
    the stored dtype is already ``dtype``), and kept converted within ``keep_budget``; with
    ``matmul`` bfloat16 the forward multiplies the stored weights in bfloat16 and nothing
    converted is kept. On a GPU they are copied over once, converted, as moving every layer
    for every forward would cost more than the forward (``matmul`` is a CPU's: not read there).
    """
    if torch.device(device).type == "cpu":
        fast = matmul is not None and matmul != dtype
        return Upcast(stored, device, dtype, 0 if fast else keep_budget(), matmul=matmul)
    return {k: v.to(device=device, dtype=dtype) for k, v in stored.items()}


def matrix(w: Mapping[str, torch.Tensor], key: str) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """Weight ``key`` as a matrix that multiplies rows itself (x Wᵀ, ``packed``) where ``w`` multiplies in bfloat16
    on its stored weights (``Upcast.matmul``); None where the forward reads ``w[key]`` and multiplies in its dtype."""
    if not isinstance(w, Upcast) or w.matmul is None:
        return None
    if isinstance(w.stored, Quantized):
        return w.stored.matrix(key)
    return packed.Stored(lambda: w.stored[key], tuple(w.stored[key].shape))


def linear(x: torch.Tensor, w: Mapping[str, torch.Tensor], key: str, bias: torch.Tensor | None = None
           ) -> torch.Tensor:
    """``F.linear(x, w[key], bias)``; in bfloat16 on the stored weights where ``w`` multiplies so (``matrix``)."""
    m = matrix(w, key)
    if m is None:
        return F.linear(x, w[key], bias)
    out = m(x)
    return out if bias is None else out + bias


def rows(w: Mapping[str, torch.Tensor], key: str, index: torch.Tensor) -> torch.Tensor:
    """``w[key][index]``, converting only the rows read where ``w`` converts on reading."""
    return w.rows(key, index) if isinstance(w, Upcast) else w[key][index]


def logits(last: torch.Tensor, w: Mapping[str, torch.Tensor], key: str) -> torch.Tensor:
    """``F.linear(last, w[key])``; where ``w`` converts on reading and cannot keep the matrix, read ``ROWS``
    rows at a time (with bfloat16 matmuls, a 4-bit GGUF matrix is packed instead and a folder's is multiplied as
    stored: ``linear``)."""
    if not isinstance(w, Upcast):
        return F.linear(last, w[key])
    if w.matmul is not None and not (isinstance(w.stored, Quantized) and key in ROW_READ
                                     and not w.stored.packs(key)):
        return linear(last, w, key)
    if key in w.kept:
        return F.linear(last, w[key])
    if isinstance(w.stored, Quantized):  # a GGUF's: read in slices (what it keeps dequantized, from that)
        n = w.stored.shape(key)[0]
    else:
        matrix = w.stored[key]
        if w.fits(matrix) or (matrix.dtype, matrix.device) == (w.dtype, w.device):
            return F.linear(last, w[key])
        n = matrix.shape[0]
    keep = w.matmul is None  # bfloat16 matmuls keep nothing dequantized
    return torch.cat([F.linear(last, stored_rows(w.stored, key, slice(i, i + ROWS), keep).to(device=w.device,
                                                                                              dtype=w.dtype))
                      for i in range(0, n, ROWS)], dim=-1)


def need_bytes(files: list[Path]) -> tuple[int, int]:
    """(the weights' bytes on disk, the largest layer's bytes in float32), read from the headers only."""
    disk = 0
    per_layer: dict[str | None, int] = {}  # by layer number (None: outside the layers)
    for file in files:
        disk += file.stat().st_size
        with open(file, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n)) if 0 < n <= 100 * 2**20 else {}
        for name, info in header.items():
            if name == "__metadata__" or not isinstance(info, dict):
                continue
            match = LAYER.search(name)
            layer = next((g for g in match.groups() if g), None) if match else None
            count = int(np.prod([int(s) for s in info.get("shape", [])], dtype=np.int64))
            per_layer[layer] = per_layer.get(layer, 0) + 4 * count
    per_layer.pop(None, None)  # embeddings and the final norm: read in slices, or small
    return disk, max(per_layer.values(), default=0)


def free_bytes() -> int | None:
    """The memory free for a new model (MemAvailable on Linux, else free pages), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(name: str, files: list[Path], free: int | None = None) -> None:
    """Refuse, in one line, a model whose weights and largest float32 layer need more memory than is free."""
    free = free_bytes() if free is None else free
    if free is None:
        return
    disk, layer = need_bytes(files)
    if disk + layer > free:
        raise ConfigError(f"{name} needs about {gb(disk + layer)} of memory ({gb(disk)} of weights and "
                          f"{gb(layer)} for a layer in float32) and {gb(free)} is free; nothing was loaded")


def gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"
