"""How glibc's allocator hands memory to a model run: one process-wide setting, made when a model is opened.

A model run allocates and frees blocks of two kinds: converted weights (float32 of a bfloat16 or
quantized file, tens of MB each, when they are not kept) and a block of attention rows' temporaries
(scores, α, the summaries' sums: a few MB each, over and over). glibc's default serves a freed
block's size from the heap from then on (its mmap threshold rises to it), so weights converted layer
by layer fragment the heap: a 0.5 B model's forward peaked 300 to 900 MB above its weights, varying
run to run. A threshold fixed at 4 MiB held that to one layer, but then every temporary of a block
of 8 MiB was mapped afresh and faulted in page by page, and fixing it also fixed the trim threshold
at 128 KiB, so the heap's free top went back to the system after every forward (20 k minor faults
a forward of the 0.5 B folder at T = 64, 8 % of its CPU time; about 4 k a block of a streamed run,
which took 38 ms a block instead of 23).

``MMAP_THRESHOLD`` sits between the two kinds: a block's temporaries (8 and 16 MiB blocks of rows,
``compute.BLOCK_BYTES``, ``llama.KEPT_BLOCK_BYTES``) come from the heap and are reused, a weight the
size of a 0.5 B model's feed-forward matrix (17 MiB) or larger is mapped and given back when freed;
``TRIM_THRESHOLD`` keeps up to 64 MiB of the heap's free top. Other C libraries (musl) are left alone.
"""

from __future__ import annotations

import ctypes
import functools
import sys

MMAP_THRESHOLD = 16 * 2**20  # bytes: glibc maps larger blocks and unmaps them when freed
TRIM_THRESHOLD = 64 * 2**20  # bytes: the free top of the heap glibc keeps rather than returning it
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)


@functools.cache
def _libc():
    """glibc, or None (another C library, another system)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def trim() -> None:
    """Give the heap's free pages back to the system, those between blocks in use too (``malloc_trim(0)``): a
    quantized matrix packed and kept (its scales, a few MB, come from the heap) sits among the temporaries freed
    after packing it, which would otherwise stay the process's (1.4 GB over an 8 B model's 224 matrices)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


@functools.cache
def tune() -> None:
    """Set both thresholds, once per process (glibc on Linux only)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    except (OSError, AttributeError):
        pass  # not glibc (musl): nothing to tune
