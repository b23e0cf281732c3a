"""A GGUF's tensors as stored: memory-mapped in their ggml type, dequantized when the forward reads them.

A quantized file is never converted whole. ``Quantized`` maps transformers' names to the
file's tensors and dequantizes one when it is read (``stored.Upcast`` reads each layer's
weights as the layer runs), so the memory a model needs is the mapped file plus one layer in
float32. Where more is free, the tensors dequantized are kept, up to half of the memory free
beyond that (``keep_budget``): a repeated forward (a decode step, the interventions' grids)
then dequantizes nothing again, and a model too large to keep whole holds the rest a layer at
a time.
An embedding lookup dequantizes only the rows read (``rows``), and the output matrix is read
in slices of rows (``stored.logits``): ggml's blocks never cross a row, so a row's bytes
dequantize on their own. Each step of llama.cpp's converter is undone after dequantizing
(``undo``: W_q and W_k un-permuted, fused Q/K/V split ...).

Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, the K-quants Q2_K to Q6_K and the IQ types are dequantized by the
``gguf`` package's ``dequantize`` (numpy, ggml's ``dequantize_row_*`` written out): torch
kernels written here for the 32-value types were 10 to 20 times slower on the CPU (many
small ops per block; docs/benchmarks.md). F32, F16 and BF16 tensors are handed out as views
of the file in their stored dtype. Any other type is refused in one line naming it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping

import numpy as np
import torch

from . import heap

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
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    rows = gguf_dequantize(raw, GGMLQuantizationType(kind))  # (n, width) float32
    return torch.from_numpy(np.asarray(rows, dtype=np.float32)).reshape(raw.shape[0], width)


class Quantized(Mapping):
    """A GGUF's tensors by transformers' name, each read from the mapped file when it is asked for.

    Parameters
    ----------
    path : Path
        The GGUF file, mapped copy-on-write (a float tensor handed out is writable, as torch
        wants, and a write stays private to this process: the file is never changed).
    sources : dict of str to (gguf_file.Tensor, int)
        transformers' name -> the file's tensor entry (type, shape, first byte, bytes) and which
        of the tensors ``undo`` makes of it this one is.
    undo : callable
        ``undo(file name, tensor)`` -> [(transformers' name, tensor), ...]: each step of llama.cpp's
        converter undone (``gguf_file.to_hf``: W_q and W_k un-permuted, a fused Q/K/V split ...).
    keep_bytes : int
        Dequantized tensors are kept, in the order first read, while they total at most this
        (``keep_budget``): a model small beside the free memory is dequantized once, as the
        float32 cache did, and a large one holds the rest one layer at a time. 0: none kept.

    The mapping is read-only (``w[key] = ...`` raises TypeError): the interventions change
    what a forward computes (``z_hooks``), never the weights.
    """

    def __init__(self, path, sources: dict, undo: Callable, keep_bytes: int = 0):
        heap.tune()  # temporaries reused from the heap, large dequantized weights mapped
        self.data = np.memmap(path, dtype=np.uint8, mode="c")
        self.sources, self.undo, self.keep_bytes = sources, undo, keep_bytes
        self._shapes = {}
        for t in dict.fromkeys(t for t, _ in sources.values()):  # each file tensor once, without its data
            for name, w in undo(t.name, torch.empty(t.shape, device="meta")):
                self._shapes[name] = tuple(w.shape)
        self.kept: dict[str, torch.Tensor] = {}
        self.kept_bytes = 0
        self._lock = threading.Lock()

    def __getitem__(self, key: str) -> torch.Tensor:
        kept = self.kept.get(key)
        if kept is not None:
            return kept
        t, part = self.sources[key]
        w = self.undo(t.name, self._rows(t, slice(None)).reshape(t.shape))[part][1].contiguous()
        if t.kind not in FLOATS:  # stored floats are views of the file already
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

    def rows(self, key: str, index) -> torch.Tensor:
        """Rows ``index`` (a tensor of ids, or a slice) of the 2-D weight ``key``, dequantizing only those
        where the file's rows are its rows (the embedding, the output matrix), else read whole."""
        t, _ = self.sources[key]
        if key not in ROW_READ or self._shapes[key] != tuple(t.shape) or self._fits(key):
            return self[key][index]
        if isinstance(index, torch.Tensor):
            index = index.cpu().numpy()
        return self._rows(t, index)

    def _rows(self, t, index) -> torch.Tensor:
        """Rows ``index`` of tensor ``t`` (a 1-D tensor is one row): stored floats as views, else float32."""
        width = t.shape[-1] if t.shape else 1
        n = int(np.prod(t.shape[:-1], dtype=np.int64))
        raw = self.data[t.start:t.start + t.nbytes]
        if len(raw) != t.nbytes:
            raise ValueError(f"the file is truncated within {t.name}")
        raw = raw.reshape(n, -1)[index]
        if t.kind in FLOATS:
            return torch.from_numpy(np.asarray(raw)).view(FLOATS[t.kind]).reshape(-1, width)
        return dequantize(np.ascontiguousarray(raw), t.kind, width)


KEEP_SHARE = 0.5  # of the memory free once the file is mapped and a layer dequantized: kept dequantized at most


def keep_budget(free: int | None, mapped: int, layer: int) -> int:
    """The bytes of dequantized tensors to keep: ``KEEP_SHARE`` of what is free beyond the mapped file and one
    float32 layer (``free`` None, unknown: none kept)."""
    return 0 if free is None else max(0, int(KEEP_SHARE * (free - mapped - layer)))
