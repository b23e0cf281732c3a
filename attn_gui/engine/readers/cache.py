"""A model's converted weights, kept on disk so that only the first load converts them.

One folder per model under the cache root (``platformdirs.user_cache_dir("attn-gui")/models``,
or ``$ATTN_GUI_CACHE_DIR/models``) holds any text files the model needs (its tokenizer),
``manifest.json`` and, where a conversion made weights, ``weights.safetensors`` (a GGUF's
are read from the file itself, ``quantized.py``, so its cache holds no weights). The manifest
names the source file (size and modification time), the converter's version, the model's
facts read at conversion, the size and CRC-32 of every file, and its own SHA-256. Every file is
written to a temporary name and renamed into place, the manifest last; a load checks all of it
first (and the facts, with the converter's ``check``), so a partial, truncated, corrupt or edited
cache is rebuilt, never used; only regular files are read.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

import numpy as np
import torch

from ..base.disk import open_regular, read_regular, save_safetensors

CACHE_ENV = "ATTN_GUI_CACHE_DIR"
WEIGHTS = "weights.safetensors"
MANIFEST = "manifest.json"
CHUNK = 16 * 2**20  # bytes read at a time when checksumming a file just written

Progress = Callable[[int, int], None]  # (done, total)


@dataclass(frozen=True)
class Converted:
    """A model converted for the engine.

    Attributes
    ----------
    weights : dict of str to tensor
        Every converted weight, on the CPU; empty where the weights are read from the source file.
    texts : dict of str to str
        Text files by name ("tokenizer.json").
    meta : dict
        JSON-ready facts read from the source file (norm epsilon, special token ids...).
    """

    weights: dict[str, torch.Tensor]
    texts: dict[str, str]
    meta: dict


def cache_root() -> Path:
    """The folder of every model's cache: ``$ATTN_GUI_CACHE_DIR/models``, else the user's cache folder."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override) / "models"
    import platformdirs

    return Path(platformdirs.user_cache_dir("attn-gui")) / "models"


def fingerprint(path: Path) -> dict:
    """What identifies a source file's contents cheaply: its name, size and modification time."""
    st = path.stat()
    return {"name": path.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def _entry(path: Path) -> dict:
    return {"size": path.stat().st_size, "crc32": _crc32(path)}


def load(folder: Path, source: dict, version: int, check: Callable[[Converted], bool] | None = None
         ) -> Converted | None:
    """The cached conversion in ``folder``, or None when it is missing, stale, partial, corrupt or changed.

    Parameters
    ----------
    folder : Path
    source : dict
        The source file's ``fingerprint``; a cache of another file is stale.
    version : int
        The converter's version; a cache written by another is stale.
    check : callable, optional
        Whether the cached facts are what the converter writes (each field there, of its type); a
        cache whose facts are not is rebuilt.

    Only regular files are read (a FIFO in the cache blocks nothing); the manifest must hold its own
    SHA-256 (``_sealed``), so a fact edited in it (an epsilon, add_bos) rebuilds the cache rather
    than changing a result; the files it names must be plain names inside ``folder``.
    """
    try:
        manifest = json.loads(read_regular(folder / MANIFEST, MANIFEST_BYTES))
        if not isinstance(manifest, dict) or manifest.get("sha256") != _sealed(manifest):
            return None
        if manifest.get("version") != version or manifest.get("source") != source:
            return None
        files, meta = manifest["files"], manifest["meta"]
        if not isinstance(files, dict) or not isinstance(meta, dict) or not all(
                _plain(name) and type(e.get("size")) is int and type(e.get("crc32")) is int
                for name, e in files.items()):
            return None
        data: dict[str, np.ndarray] = {}
        for name, entry in files.items():
            # one read per file: the bytes checked are the bytes used
            raw = _read(folder / name, entry["size"])
            if raw is None or zlib.crc32(raw.data) != entry["crc32"]:
                return None
            data[name] = raw
        weights = parse_safetensors(data.pop(WEIGHTS)) if WEIGHTS in data else {}
        texts = {name: raw.tobytes().decode("utf-8") for name, raw in data.items()}
        converted = Converted(weights, texts, meta)
        return converted if check is None or check(converted) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RuntimeError, MemoryError, RecursionError):
        return None


MANIFEST_BYTES = 16 * 2**20  # a manifest names a few files and facts; special_ids may list thousands


def _sealed(manifest: dict) -> str:
    """The SHA-256 of the manifest's fields but ``sha256`` itself, as canonical JSON (sorted keys)."""
    rest = {k: v for k, v in manifest.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


def _plain(name: object) -> bool:
    """A file name of the cache folder itself: no separator, not ``.`` or ``..``."""
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and os.sep not in name \
        and "\0" not in name


def _read(path: Path, size: int) -> np.ndarray | None:
    """The file's bytes (uint8), or None unless it is a regular file of exactly ``size`` of them.

    Read into an uninitialised array: zeroing a bytearray of 538 MB first would hold the GIL
    for a tenth of a second; the read itself and the CRC-32 let other threads run.
    """
    buffer = np.empty(size, dtype=np.uint8)
    with open_regular(path) as f:
        if f.readinto(buffer.data) != size or f.read(1):
            return None
    return buffer


DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}


def parse_safetensors(buffer: np.ndarray) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file held in ``buffer`` (uint8), as views of it (no copy).

    The format is an 8-byte little-endian header length, a JSON header naming each tensor's
    dtype, shape and [start, end) byte offsets after the header, then the data (the header is
    padded so that the data are aligned). Reading it here, one small view per tensor, lets
    other threads run in between:
    ``safetensors.torch.load`` holds the GIL for the whole file (about 200 ms for SmolLM2,
    a stall of the window). Raises ValueError or KeyError on a malformed file.
    """
    n = int.from_bytes(buffer[:8].tobytes(), "little")
    if not 0 < n <= len(buffer) - 8:
        raise ValueError("bad safetensors header length")
    header = json.loads(buffer[8:8 + n].tobytes())
    data = torch.from_numpy(buffer)
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = DTYPES[info["dtype"]]
        start, end = info["data_offsets"]
        shape = [int(d) for d in info["shape"]]
        count = (end - start) // dtype.itemsize
        if not 0 <= start <= end <= len(buffer) - base or count != math.prod(shape):
            raise ValueError(f"bad offsets or shape of {name!r}")
        tensors[name] = data[base + start:base + end].view(dtype).reshape(shape)
    return tensors


def _write_atomic(folder: Path, name: str, write: Callable[[str], object]) -> None:
    """Write ``name`` in ``folder`` through a temporary file renamed into place."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, folder / name)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def store(folder: Path, source: dict, version: int, converted: Converted) -> None:
    """Write ``converted`` into ``folder``: every file atomically, then the manifest that vouches for them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).unlink(missing_ok=True)  # no manifest while the files change: a crash leaves no cache
    written = list(converted.texts)
    if converted.weights:
        _write_atomic(folder, WEIGHTS, lambda tmp: save_safetensors(converted.weights, tmp))
        written.insert(0, WEIGHTS)
    else:
        (folder / WEIGHTS).unlink(missing_ok=True)  # an older version's converted weights: no longer read
    for name, text in converted.texts.items():
        _write_atomic(folder, name, functools.partial(_write_text, text=text))
    files = {name: _entry(folder / name) for name in written}
    manifest = {"version": version, "source": source, "meta": converted.meta, "files": files}
    manifest["sha256"] = _sealed(manifest)
    _write_atomic(folder, MANIFEST, functools.partial(_write_text, text=json.dumps(manifest, indent=1)))


def _write_text(path: str, text: str) -> None:
    Path(path).write_text(text, encoding="utf-8")


def load_or_build(folder: Path, source: dict, version: int, build: Callable[[Progress], Converted],
                  progress: Progress | None = None, check: Callable[[Converted], bool] | None = None) -> Converted:
    """The cached conversion, or ``build(progress)`` stored for the next time.

    ``progress(done, total)`` is called while building (the last step is writing the cache);
    a load from a valid cache calls it never. A cache folder that cannot be written leaves the
    conversion in memory only. ``check``: as ``load``'s.
    """
    found = load(folder, source, version, check)
    if found is not None:
        return found
    report = progress or (lambda done, total: None)
    steps: list[int] = []

    def building(done: int, total: int) -> None:
        steps[:] = [total + 1]  # one more step: writing the cache
        report(done, total + 1)

    converted = build(building)
    total = steps[0] if steps else 1
    with contextlib.suppress(OSError):  # read-only or full disk: this run converts again next time
        store(folder, source, version, converted)
    report(total, total)
    return converted
