"""Matmuls on a model's stored weights in bfloat16: 4-bit GGUF blocks packed for PyTorch's int4 kernel.

A matrix here multiplies rows itself (``x Wᵀ``, as ``F.linear``) without a float32 copy of
itself: ``Int4Matrix`` holds a GGUF's 4-bit blocks packed for PyTorch's CPU kernel
``_weight_int4pack_mm_for_cpu`` (groups of 32 values, each with a scale and a zero point:
w = (q - 8) s + z), ``Stored`` a bfloat16 matrix as it is stored (a folder's, mapped), and
``Dequantized`` any other GGUF type, dequantized when it multiplies and dropped after.

The three 4-bit types map onto the kernel's groups exactly (``int4_parts``; ggml's
``dequantize_row_*``):

- Q4_0, blocks of 32: w = d (q - 8), so s = d and z = 0;
- Q4_1, blocks of 32: w = d q + m, so s = d and z = m + 8 d;
- Q4_K, super-blocks of 256 in 8 sub-blocks of 32, each with a 6-bit scale sc and a 6-bit minimum m:
  w = d sc q - dmin m, so s = d sc and z = 8 d sc - dmin m.

PyTorch's kernel is fast only in bfloat16 (on this machine's AVX-512 CPU a 46-row product by a
4096 x 4096 matrix took 24 ms in bfloat16 and 1.6 s in float32, the float32 one being its
reference loop): x, s and z are rounded to bfloat16 and the product comes back in bfloat16,
its sums taken in float32. A product then differs from ``gguf.quants.dequantize`` followed by a
float32 matmul by about 2⁻⁸ of its size (``tests/engine/test_packed.py`` states the bound). The
other types (Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q5_K, Q6_K, the IQ types) have no exact kernel (Q8_0's
scales are per 32 values, ``_weight_int8pack_mm``'s per row; Q6_K's per 16): their blocks are
dequantized to float32 when a matrix multiplies, as the ``gguf`` package gives them, rounded to
bfloat16 and multiplied by PyTorch's bfloat16 matmul, then dropped.

The packed layout (``pack_int4``) is the kernel's own (``_convert_weight_to_int4pack_for_cpu``,
which reads int32 values one at a time): built here with a few tensor operations from the nibbles,
after checking once per process, on a small matrix, that they give the kernel's bytes; where they
do not (another CPU's layout), the kernel's converter packs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F

Q4_0, Q4_1, Q4_K = 2, 3, 12  # ggml types that map onto the int4 kernel
INT4 = {Q4_0: "Q4_0", Q4_1: "Q4_1", Q4_K: "Q4_K"}
Q8_0, Q6_K = 8, 14  # ggml types kept as int8 values with a scale per group (``Int8Matrix``)
INT8 = {Q8_0: 32, Q6_K: 16}  # their groups' sizes
GROUP = 32  # values sharing a scale and a zero point in the kernel (qGroupSize)
RUNS = {Q4_0: (18, 2, 16), Q4_1: (20, 4, 16), Q4_K: (144, 16, 32)}  # block bytes, bytes before nibbles, run
BLOCK_N = 64  # rows interleaved by the kernel's packed layout on AVX-512 (``pack_int4``)


def fits(kind: int, shape: tuple[int, ...]) -> bool:
    """Whether a matrix of ggml type ``kind`` and ``shape`` is kept packed: for the int4 kernel (``fits_int4``), or
    as int8 values (Q8_0, Q6_K: ``Int8Matrix``)."""
    return fits_int4(kind, shape) or kind in INT8 and len(shape) == 2


def fits_int4(kind: int, shape: tuple[int, ...]) -> bool:
    """Whether a matrix of ggml type ``kind`` and ``shape`` (rows, columns) packs for the int4 kernel: a 4-bit type,
    rows a multiple of 16 and whole groups of 32 per row (the kernel's own conditions)."""
    return kind in INT4 and len(shape) == 2 and shape[0] % 16 == 0 and shape[1] % GROUP == 0


def int4_parts(raw: torch.Tensor, kind: int, width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows of 4-bit blocks (``raw``: (n, bytes per row) uint8) as (q, s, z): the values 0 … 15 (n, width) uint8
    and each group of 32's scale and zero point (n, width / 32) float32, w = (q - 8) s + z as ggml dequantizes."""
    s, z = group_scales(raw, kind, width)
    return values(raw, kind, width), s.t(), z.t()


def values(raw: torch.Tensor, kind: int, width: int) -> torch.Tensor:
    """The values 0 … 15 (n, width) uint8 of rows of 4-bit blocks ``raw`` (n, bytes per row): in each run of r bytes
    of nibbles (Q4_0 and Q4_1 one run of 16 a block, Q4_K four of 32) the low nibbles are its first r values, the
    high nibbles the next r."""
    size, head, run = RUNS[kind]
    n = raw.shape[0]
    runs = raw.view(n, -1, size)[..., head:].reshape(n, -1, 1, run)
    q = torch.empty(n, runs.shape[1], 2, run, dtype=torch.uint8)
    torch.bitwise_and(runs, 15, out=q[:, :, :1])
    torch.bitwise_right_shift(runs, 4, out=q[:, :, 1:])
    return q.view(n, width)


def group_scales(raw: torch.Tensor, kind: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each group of 32's scale and zero point (width / 32, n) float32, groups first as the kernel reads them, of rows
    of 4-bit blocks ``raw``: Q4_0's d and 0, Q4_1's d and m + 8 d, Q4_K's d sc and 8 d sc - dmin m."""
    n = raw.shape[0]
    size, head, _ = RUNS[kind]
    blocks = raw.view(n, -1, size).transpose(0, 1)  # (blocks, n, bytes): groups first
    halves = blocks[..., :4].contiguous().view(torch.float16).float()  # d and (Q4_1) m, or (Q4_K) d and dmin
    if kind in (Q4_0, Q4_1):
        s = halves[..., 0]
        return s, torch.zeros_like(s) if kind == Q4_0 else halves[..., 1] + 8 * s
    if kind != Q4_K:
        raise ValueError(f"ggml type {kind} is not a 4-bit type")
    sc, m = k_scales(blocks[..., 4:16].to(torch.int32))  # (S, n, 8): d, dmin, then 12 bytes of 6-bit scales, minima
    s = (halves[..., 0:1] * sc).transpose(1, 2).reshape(-1, n)  # d sc, each sub-block of 32, (S 8, n)
    return s, 8 * s - (halves[..., 1:2] * m).transpose(1, 2).reshape(-1, n)


def k_scales(b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_K's (and Q5_K's) 8 scales and 8 minima of 6 bits from their 12 bytes (ggml's ``get_scale_min_k4``)."""
    lo = (b[..., 0:4] & 63, b[..., 4:8] & 63)  # sub-blocks 0-3: the low 6 bits of bytes 0-3 and 4-7
    sc_hi = (b[..., 8:12] & 15) | ((b[..., 0:4] >> 6) << 4)  # 4-7: 4 bits of bytes 8-11, 2 of bytes 0-3
    m_hi = (b[..., 8:12] >> 4) | ((b[..., 4:8] >> 6) << 4)
    return torch.cat([lo[0], sc_hi], -1).float(), torch.cat([lo[1], m_hi], -1).float()


@functools.cache
def _layout_holds() -> bool:
    """Whether ``_interleave`` gives the kernel's converter's bytes on this CPU (checked once, on 128 x 64 values)."""
    q = torch.randint(0, 16, (2 * BLOCK_N, 64), generator=torch.Generator().manual_seed(0), dtype=torch.int32)
    return torch.equal(_interleave(q.to(torch.uint8)), torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 2))


def _interleave(q: torch.Tensor) -> torch.Tensor:
    """The kernel's AVX-512 layout: in each block of 64 rows, for each column k, byte 16 j + i (j = 0, 1) holds
    row 16 j + i in its low nibble and row 32 + 16 j + i in its high one. (N, K) -> (N, K / 2) uint8."""
    n, k = q.shape
    rows = q.view(n // BLOCK_N, 4, 16, k)
    return (rows[:, 2:] << 4 | rows[:, :2]).permute(0, 3, 1, 2).reshape(n, k // 2)


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """Values 0 … 15 (N, K) uint8 in the int4 kernel's packed layout (N, K / 2) uint8."""
    if q.shape[0] % BLOCK_N == 0 and _layout_holds():
        return _interleave(q)
    return torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32), 2)




def pack_blocks(raw: torch.Tensor, kind: int, width: int) -> torch.Tensor:
    """Rows of 4-bit blocks (``raw``: (N, bytes per row) uint8) straight into the kernel's layout (N, K / 2), as
    ``pack_int4(values(raw))`` gives it, byte by byte without unpacking the nibbles.

    A block's nibbles come in runs of r bytes (Q4_0, Q4_1: 16; Q4_K: 32), the low nibbles the run's first r
    values, the high ones its next r. The kernel's byte holds two rows of one column: so the column's byte of
    rows (a, b) is (b << 4 | a & 15) in a run's first half, (b & 0xF0 | a >> 4) in its second."""
    n = raw.shape[0]
    if n % BLOCK_N or not _layout_holds():
        return pack_int4(values(raw, kind, width))
    size, head, run = RUNS[kind]
    runs, blocks = width // (2 * run), n // BLOCK_N
    # the nibble bytes gathered once (contiguous: the operations below run over whole rows), 64 rows a block
    nib = raw.view(n, -1, size)[..., head:].contiguous().view(blocks, 4, 16, runs * run)
    lo, hi = nib[:, :2], nib[:, 2:]  # rows 16 j + i and 32 + 16 j + i (j = 0, 1) share a byte
    both = torch.empty(blocks, 2, 2, 16, runs * run, dtype=torch.uint8)  # (row block, half of a run, j, i, byte)
    torch.bitwise_left_shift(hi, 4, out=both[:, 0])
    both[:, 0] |= lo & 15
    torch.bitwise_and(hi, 0xF0, out=both[:, 1])
    both[:, 1] |= lo >> 4
    # each row block's 32 rows x its bytes transposed: (row block, run, half, byte, j i)
    return both.view(blocks, 2, 32, runs, run).permute(0, 3, 1, 4, 2).reshape(n, width // 2)


def scales_zeros(s: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Each group's scale and zero point (K / 32, N) in the kernel's (K / 32, N, 2) bfloat16."""
    out = torch.empty(*s.shape, 2, dtype=torch.bfloat16)
    out[..., 0], out[..., 1] = s, z
    return out


class Int4Matrix:
    """A matrix W (N, K) of 4-bit values with a scale and a zero point per 32 (w = (q - 8) s + z), packed for
    ``_weight_int4pack_mm_for_cpu``; ``m(x)`` is x Wᵀ in bfloat16 (its sums in float32), in x's dtype.
    ``of_blocks`` packs a GGUF's 4-bit blocks."""

    def __init__(self, packed: torch.Tensor, scales: torch.Tensor, shape: tuple[int, int]):
        self.packed, self.scales, self.shape = packed, scales, shape  # (N, K / 2) uint8, (K / 32, N, 2) bfloat16

    @classmethod
    def of_blocks(cls, raw: torch.Tensor, kind: int, width: int) -> Int4Matrix:
        """The matrix of rows of 4-bit blocks ``raw`` (N, bytes per row) of ggml type ``kind``."""
        return cls(pack_blocks(raw, kind, width), scales_zeros(*group_scales(raw, kind, width)), (raw.shape[0], width))

    @property
    def nbytes(self) -> int:
        return self.packed.nbytes + self.scales.nbytes

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.shape[1]).to(torch.bfloat16)
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(rows, self.packed, GROUP, self.scales)
        return out.to(x.dtype).reshape(*x.shape[:-1], self.shape[0])


class Stored:
    """A matrix read when it multiplies: ``read()`` gives W (a bfloat16 folder's view of its file, or a GGUF matrix
    of a type without an exact kernel, dequantized to float32 and rounded to bfloat16, then dropped); ``m(x)`` is
    x Wᵀ in bfloat16, in x's dtype."""

    def __init__(self, read: Callable[[], torch.Tensor], shape: tuple[int, ...]):
        self.read, self.shape = read, shape

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        w = self.read()
        w = w if w.dtype == torch.bfloat16 else w.to(torch.bfloat16)  # dequantized or float32: rounded, dropped after
        return F.linear(x.to(torch.bfloat16), w).to(x.dtype)



def int8_parts(raw: torch.Tensor, kind: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of Q8_0 or Q6_K blocks (``raw``: (n, bytes per row) uint8) as int8 values (n, width) and each group's
    scale (n, width / group) float32, w = q s: Q8_0's int8 values and d per 32; Q6_K's 6-bit values less 32 and
    d sc per 16 (ggml's block_q6_K: per 256 values 128 bytes of low nibbles, 64 of high bit pairs, 16 int8
    scales and d; each half of 128 values from 64 low and 32 high bytes)."""
    n = raw.shape[0]
    if kind == Q8_0:
        blocks = raw.view(n, width // 32, 34)
        d = blocks[..., :2].contiguous().view(torch.float16).float()[..., 0]  # (n, G)
        return blocks[..., 2:].contiguous().view(torch.int8).view(n, width), d
    s = width // 256
    blocks = raw.view(n, s, 210)
    ql = blocks[..., :128].reshape(n, s, 2, 1, 64)
    qh = blocks[..., 128:192].reshape(n, s, 2, 1, 1, 32)
    scales = blocks[..., 192:208].contiguous().view(torch.int8).float()  # (n, s, 16)
    d = blocks[..., 208:210].contiguous().view(torch.float16).float()  # (n, s, 1)
    q = torch.cat([ql & 15, ql >> 4], dim=3).view(n, s, 2, 128)  # the low 4 bits: values 0-63, then 64-127
    q |= (((qh >> _SHIFTS) & 3) << 4).view(n, s, 2, 128)  # the high 2: bits 0-1 values 0-31, 2-3 values 32-63 ...
    q -= 32  # 0 … 63 -> -32 … 31, as int8 below
    return q.view(torch.int8).view(n, width), (d * scales).view(n, -1)


_SHIFTS = torch.tensor([0, 2, 4, 6], dtype=torch.uint8).view(1, 1, 1, 4, 1)
CHUNK = 8 * 2**20  # values of W made in bfloat16 at a time by ``Int8Matrix``


class Int8Matrix:
    """A matrix W (N, K) of int8 values with a scale per group of ``group`` (w = q s: Q8_0, Q6_K); ``m(x)`` is x Wᵀ in
    bfloat16, W made a block of rows at a time (q s rounded to bfloat16) and multiplied, in x's dtype."""

    def __init__(self, values: torch.Tensor, scales: torch.Tensor):
        self.values, self.shape = values, tuple(values.shape)  # (N, K) int8
        self.scales = scales.to(torch.bfloat16)  # (N, K / group)

    @classmethod
    def of_blocks(cls, raw: torch.Tensor, kind: int, width: int) -> Int8Matrix:
        """The matrix of rows of Q8_0 or Q6_K blocks ``raw`` (N, bytes per row), ``CHUNK`` values at a time (the
        unpacking's temporaries stay small beside a 128k-token output matrix)."""
        n = raw.shape[0]
        values = torch.empty(n, width, dtype=torch.int8)
        scales = torch.empty(n, width // INT8[kind], dtype=torch.bfloat16)
        step = max(1, CHUNK // width)
        for start in range(0, n, step):
            q, s = int8_parts(raw[start:start + step], kind, width)
            values[start:start + step], scales[start:start + step] = q, s
        return cls(values, scales)

    @property
    def nbytes(self) -> int:
        return self.values.nbytes + self.scales.nbytes

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        n, k = self.shape
        groups = self.scales.shape[1]
        rows = x.reshape(-1, k).to(torch.bfloat16)
        out = torch.empty(rows.shape[0], n, dtype=torch.bfloat16)
        step = max(1, CHUNK // k)
        w = torch.empty(min(step, n), groups, k // groups, dtype=torch.bfloat16)
        for start in range(0, n, step):
            end = min(n, start + step)
            block = torch.mul(self.values[start:end].view(end - start, groups, -1), self.scales[start:end, :, None],
                              out=w[:end - start])
            torch.matmul(rows, block.view(end - start, k).t(), out=out[:, start:end])
        return out.to(x.dtype).reshape(*x.shape[:-1], n)
