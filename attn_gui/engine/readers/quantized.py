"""A GGUF's tensors as stored: memory-mapped in their ggml type, dequantized when the forward reads them.

A quantized file is never converted whole. ``Quantized`` maps transformers' names to the
file's tensors and dequantizes one when it is read (``stored.Upcast`` reads each layer's
weights as the layer runs), so the memory a model needs is the mapped file plus one matrix in
float32. Where more is free, the tensors dequantized are kept, up to half of the memory free
beyond that and 512 MiB (``keep_budget``): a small model's repeated forward (a decode step, the
interventions' grids) then dequantizes nothing again, and a model too large to keep whole holds
the rest a matrix at a time.
An embedding lookup dequantizes only the rows read (``rows``), and the output matrix is read
in slices of rows (``stored.logits``): ggml's blocks never cross a row, so a row's bytes
dequantize on their own. Each step of llama.cpp's converter is undone after dequantizing
(``undo``: W_q and W_k un-permuted, fused Q/K/V split ...).

With bfloat16 matmuls (the config's dtype "bfloat16") the forward asks for ``matrix(key)``
instead: a matrix that multiplies rows itself (``packed``), the 4-bit types packed once for
PyTorch's int4 kernel and Q8_0 and Q6_K kept as int8 values with their scales; each matrix's
pages of the file are then given back, so the process holds the packed model, about the
file's size, and nothing in float32.

Q4_0, Q4_1 and Q8_0 are dequantized here, over all blocks at once in numpy (``_blocks_32``: the ``gguf``
package's arithmetic, equal bit for bit, in a third of its time); Q5_0, Q5_1, the K-quants Q2_K to Q6_K and
the IQ types by the ``gguf`` package's ``dequantize`` (numpy, ggml's ``dequantize_row_*`` written out): torch written
over whole tensors with the same arithmetic (equal bit for bit) was no faster on an 8 B model's
matrices and 30 to 100 times slower on SmolLM2's small ones on this loaded 2-core machine (each
operation waits for its second thread; docs/benchmarks.md). F32, F16 and BF16 tensors are handed
out as views of the file in their stored dtype. Any other type is refused in one line naming it.
"""

from __future__ import annotations

import math
import mmap
import threading
from collections.abc import Callable, Mapping

import numpy as np
import torch

from . import heap
from . import packed

FLOATS = {0: torch.float32, 1: torch.float16, 30: torch.bfloat16}  # ggml types F32, F16, BF16
QUANTS = {2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K",
          14: "Q6_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S",
          23: "IQ4_XS", 29: "IQ1_M"}  # the ggml types gguf.quants dequantizes that llama.cpp's files use
READ = {0: "F32", 1: "F16", 30: "BF16", **QUANTS}
ROW_READ = ("model.embed_tokens.weight", "lm_head.weight")  # read by rows (stored.rows, stored.logits), as stored


def unread(kinds) -> str | None:
    """The name of the first ggml type in ``kinds`` that is not read here, or None."""
    for kind in kinds:
        if kind not in READ:
            try:
                from gguf.constants import GGMLQuantizationType

                return GGMLQuantizationType(kind).name
            except (ImportError, ValueError):
                return f"type {kind}"
    return None


def dequantize(raw: np.ndarray, kind: int, width: int) -> torch.Tensor:
    """Rows of ggml type ``kind`` (``raw``: (n, bytes per row) uint8) as float32 (n, ``width``)."""
    if kind not in QUANTS:
        raise ValueError(f"the ggml type {unread([kind])} is not read")
    if kind in BLOCKS_32:
        return torch.from_numpy(_blocks_32(raw, kind)).reshape(raw.shape[0], width)
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    rows = gguf_dequantize(raw, GGMLQuantizationType(kind))  # (n, width) float32
    return torch.from_numpy(np.asarray(rows, dtype=np.float32)).reshape(raw.shape[0], width)


BLOCKS_32 = {2: 18, 3: 20, 8: 34}  # Q4_0, Q4_1, Q8_0: bytes per block of 32 values


def _blocks_32(raw: np.ndarray, kind: int) -> np.ndarray:
    """Q4_0, Q4_1 or Q8_0 blocks as float32 (blocks, 32): ggml's ``dequantize_row_q4_0`` / ``q4_1`` / ``q8_0``,
    the ``gguf`` package's arithmetic (d * (q - 8), d * q + m, d * q in float32: equal bit for bit) done over
    every block at once, without its grouping of rows (a third of its time on SmolLM2's matrices, which its
    splitting and copying per group of rows otherwise dominates; docs/benchmarks.md)."""
    size = BLOCKS_32[kind]
    blocks = np.ascontiguousarray(raw).reshape(-1, size)
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)  # (blocks, 1)
    out = np.empty((blocks.shape[0], 32), np.float32)
    if kind == 8:  # Q8_0: d, then 32 int8
        out[:] = blocks[:, 2:].view(np.int8)
        out *= d
        return out
    qs = blocks[:, size - 16:]  # 16 bytes: value j in the low nibble of byte j, value 16 + j in its high one
    np.bitwise_and(qs, 15, out=out[:, :16], casting="unsafe")
    np.right_shift(qs, 4, out=out[:, 16:], casting="unsafe")
    if kind == 2:  # Q4_0: d * (q - 8)
        out -= 8
        out *= d
    else:  # Q4_1: d, m, then d * q + m
        out *= d
        out += blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
    return out


class Quantized(Mapping):
    """A GGUF's tensors by transformers' name, each read from the mapped file when it is asked for.

    Parameters
    ----------
    path : Path
        The GGUF file, mapped copy-on-write (a float tensor handed out is writable, as torch
        wants, and a write stays private to this process: the file is never changed).
    sources : dict of str to (gguf.format.Tensor, int)
        transformers' name -> the file's tensor entry (type, shape, first byte, bytes) and which
        of the tensors ``undo`` makes of it this one is.
    undo : callable
        ``undo(file name, tensor)`` -> [(transformers' name, tensor), ...]: each step of llama.cpp's
        converter undone (``gguf.tensors.to_hf``: W_q and W_k un-permuted, a fused Q/K/V split ...).
    keep_bytes : int
        Dequantized tensors are kept, in the order first read, while they total at most this
        (``keep_budget``): a model small beside the free memory is dequantized once, as the
        float32 cache did, and a large one holds the rest one layer at a time. 0: none kept.

    The mapping is read-only (``w[key] = ...`` raises TypeError): the interventions change
    what a forward computes (``z_hooks``), never the weights.

    ``matrix(key)`` gives a matrix that multiplies itself in bfloat16 (``packed``): a 4-bit one is
    packed for PyTorch's int4 kernel once and kept (``packed_bytes``), and its pages of the file
    are given back (``MADV_DONTNEED``: the page cache keeps them, the process no longer holds
    them); any other is dequantized when it multiplies.
    """

    def __init__(self, path, sources: dict, undo: Callable, keep_bytes: int = 0):
        heap.tune()  # temporaries reused from the heap, large dequantized weights mapped
        with open(path, "rb") as f:  # copy-on-write (MAP_PRIVATE): writable views, the file never changed
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        self.data = np.frombuffer(self._map, dtype=np.uint8)
        self.sources, self.undo, self.keep_bytes = sources, undo, keep_bytes
        self._shapes = {}
        for t in dict.fromkeys(t for t, _ in sources.values()):  # each file tensor once, without its data
            for name, w in undo(t.name, torch.empty(t.shape, device="meta")):
                self._shapes[name] = tuple(w.shape)
        self.kept: dict[str, torch.Tensor] = {}
        self.kept_bytes = 0
        self.packed: dict[str, packed.Int4Matrix | packed.Int8Matrix] = {}  # matrices packed (``matrix``), kept
        self._lock = threading.Lock()

    def __getitem__(self, key: str) -> torch.Tensor:
        return self.read(key)

    def read(self, key: str, keep: bool = True) -> torch.Tensor:
        """Weight ``key`` (float32 where dequantized); ``keep``: kept dequantized while the budget allows."""
        kept = self.kept.get(key)
        if kept is not None:
            return kept
        t, part = self.sources[key]
        w = self.undo(t.name, self._rows(t, slice(None)).reshape(t.shape))[part][1].contiguous()
        if keep and t.kind not in FLOATS:  # stored floats are views of the file already
            with self._lock:
                if key not in self.kept and self.kept_bytes + w.nbytes <= self.keep_bytes:
                    self.kept[key] = w
                    self.kept_bytes += w.nbytes
        return w

    def _fits(self, key: str) -> bool:
        """Whether weight ``key`` is kept dequantized, or would be on its next whole read."""
        t, _ = self.sources[key]
        return key in self.kept or t.kind not in FLOATS and self.kept_bytes + 4 * math.prod(t.shape) <= self.keep_bytes

    def __iter__(self):
        return iter(self.sources)

    def __len__(self) -> int:
        return len(self.sources)

    def __contains__(self, key) -> bool:  # Mapping's would dequantize the weight to answer
        return key in self.sources

    def shape(self, key: str) -> tuple[int, ...]:
        """The shape of weight ``key`` (nothing is read)."""
        return self._shapes[key]

    def shapes(self) -> dict[str, torch.Tensor]:
        """Every weight as a tensor of its shape holding no data (``checks.decoder_weights`` reads shapes only)."""
        return {key: torch.empty(shape, device="meta") for key, shape in self._shapes.items()}

    def rows(self, key: str, index, keep: bool = True) -> torch.Tensor:
        """Rows ``index`` (a tensor of ids, or a slice) of the 2-D weight ``key``, dequantizing only those
        where the file's rows are its rows (the embedding, the output matrix), else read whole (and kept where
        ``keep`` and the budget allow)."""
        t, _ = self.sources[key]
        if key not in ROW_READ or self._shapes[key] != tuple(t.shape) or keep and self._fits(key):
            return self.read(key, keep)[index]
        if isinstance(index, torch.Tensor):
            index = index.cpu().numpy()
        return self._rows(t, index)

    def matrix(self, key: str) -> packed.Int4Matrix | packed.Int8Matrix | packed.Stored:
        """Weight ``key`` as a matrix that multiplies rows in bfloat16: 4-bit blocks packed for the int4 kernel, Q8_0
        and Q6_K as int8 values and scales (the first call packs them, later ones find them kept), any other type
        dequantized when it multiplies."""
        t, part = self.sources[key]
        if not self.packs(key):
            return packed.Stored(lambda: self.read(key, keep=False), self._shapes[key])
        with self._lock:  # one thread packs a matrix; another waits for it
            made = self.packed.get(key)
            if made is None:
                raw = torch.from_numpy(self._raw(t).reshape(t.shape[0], -1))  # (rows, bytes) of the file, no copy
                rows = self.undo(t.name, raw)[part][1]  # W_q's and W_k's rows un-permuted, a fused matrix's part
                kept = packed.Int4Matrix if packed.fits_int4(t.kind, self._shapes[key]) else packed.Int8Matrix
                made = self.packed[key] = kept.of_blocks(rows.contiguous(), t.kind, t.shape[1])
                if all(k in self.packed for k, (u, _) in self.sources.items() if u is t):
                    self._drop(t)
                heap.trim()
        return made

    def packs(self, key: str) -> bool:
        """Whether weight ``key`` multiplies packed (``packed.fits``): for the int4 kernel, or as int8 values."""
        t, _ = self.sources[key]
        return len(t.shape) == 2 and packed.fits(t.kind, self._shapes[key])

    @property
    def packed_bytes(self) -> int:
        """The bytes of the 4-bit matrices packed so far."""
        return sum(m.nbytes for m in self.packed.values())

    def _drop(self, t) -> None:
        """Give back the process's pages of tensor ``t``'s bytes (whole pages only: a neighbour keeps its own)."""
        page = mmap.PAGESIZE
        start, end = -(-t.start // page) * page, (t.start + t.nbytes) // page * page
        if end > start and hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED, start, end - start)

    def _raw(self, t) -> np.ndarray:
        """Tensor ``t``'s bytes in the mapped file; ValueError where the file ends before them."""
        raw = self.data[t.start:t.start + t.nbytes]
        if len(raw) != t.nbytes:
            raise ValueError(f"the file is truncated within {t.name}")
        return raw

    def _rows(self, t, index) -> torch.Tensor:
        """Rows ``index`` of tensor ``t`` (a 1-D tensor is one row): stored floats as views, else float32."""
        width = t.shape[-1] if t.shape else 1
        n = int(np.prod(t.shape[:-1], dtype=np.int64))
        raw = self._raw(t).reshape(n, -1)[index]
        if t.kind in FLOATS:
            return torch.from_numpy(np.asarray(raw)).view(FLOATS[t.kind]).reshape(-1, width)
        return dequantize(np.ascontiguousarray(raw), t.kind, width)


KEEP_SHARE = 0.5  # of the memory free once the file is mapped and a layer dequantized: kept dequantized at most
# and never more than this: a model's peak RSS stays within its file + 1.5 GiB in float32 too (an 8 B file's grew by
# 12.8 GiB, and by 8.5 GiB with 17 GB free); SmolLM2's 0.4 GiB of float32 matrices are all kept
KEEP_MAX = 512 * 2**20


def keep_budget(free: int | None, mapped: int, layer: int) -> int:
    """The bytes of dequantized tensors to keep: ``KEEP_SHARE`` of what is free beyond the mapped file and one
    float32 layer, at most ``KEEP_MAX`` (``free`` None, unknown: none kept)."""
    return 0 if free is None else min(KEEP_MAX, max(0, int(KEEP_SHARE * (free - mapped - layer))))
