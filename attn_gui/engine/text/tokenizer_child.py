"""A ``tokenizers.Tokenizer`` built and run in a child process, so that building it never holds this one's lock.

``Tokenizer.from_str`` of SmolLM2's 49,152-token byte-level BPE holds Python's interpreter lock
for 80 to 90 ms in one Rust call (a 151,936-token one longer), and no other thread of the
process runs meanwhile: the window's GUI thread stalled that long while its worker loaded a
model (docs/benchmarks.md). ``Child`` starts a Python that builds the tokenizer from the same
file or JSON with the same library, and answers over a pipe; this process waits on the pipe
with its lock released. It offers what the decoders read of a ``tokenizers.Tokenizer``:
``encode(text, add_special_tokens)`` (its ``ids`` and ``tokens``), ``decode(ids, skip_special_tokens)``,
``get_vocab(with_added_tokens=True)``, ``get_added_tokens_decoder()`` (each with ``content`` and
``special``) and ``model.unk_token``. The vocabulary comes over once, when the tokenizer is
built; each encode and decode is one round trip.

The child is started at once and waited for on first use (``wait``), so a load can map its
weights meanwhile. Where no child can be started or answers, the tokenizer is built here.
The child ends when its ``Child`` is collected (its pipe closed) or this process exits.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

# The child: reads one JSON request per line, answers one JSON line each; imports tokenizers only.
CHILD = r"""
import json, sys
from tokenizers import Tokenizer

def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

def failed(exc):
    reply({"error": type(exc).__name__, "message": str(exc)})

CHUNK = int(sys.argv[1])
first = json.loads(sys.stdin.buffer.readline())
try:
    if "path" in first:
        tok = Tokenizer.from_file(first["path"])
    else:  # the JSON follows as raw bytes
        tok = Tokenizer.from_str(sys.stdin.buffer.read(first["bytes"]).decode("utf-8"))
    added = {str(i): [t.content, t.special] for i, t in tok.get_added_tokens_decoder().items()}
    unk = getattr(tok.model, "unk_token", None)
except Exception as exc:
    failed(exc)
    sys.exit(0)
vocab = list(tok.get_vocab(with_added_tokens=True).items())
chunks = [vocab[i:i + CHUNK] for i in range(0, len(vocab), CHUNK)]
reply({"chunks": len(chunks), "added": added, "unk_token": unk})
for chunk in chunks:
    reply(chunk)
for line in sys.stdin.buffer:
    op, *args = json.loads(line)
    try:
        if op == "encode":
            encoding = tok.encode(args[0], add_special_tokens=args[1])
            reply({"value": [encoding.ids, encoding.tokens]})
        else:
            reply({"value": tok.decode(args[0], skip_special_tokens=args[1])})
    except Exception as exc:
        failed(exc)
"""

# the vocabulary comes over in lines of this many tokens: each line's json.loads holds the lock under 1 ms
CHUNK = 2048
# what the child may raise from the data, raised here as the same type (``checks.tokenizer_errors`` reads it)
ERRORS = {e.__name__: e for e in (Exception, TypeError, ValueError, KeyError, IndexError)}


@dataclass(frozen=True)
class Encoding:
    """What is read of a ``tokenizers.Encoding``: the ids and the tokens' strings."""

    ids: list[int]
    tokens: list[str]


class ChildFailed(RuntimeError):
    """The child ended or could not be started: not the data's fault."""


class Child:
    """A tokenizer in a child process, from ``path`` (a tokenizer.json) or ``text`` (its JSON).

    The child starts at once; ``wait`` (or the first use) waits for its tokenizer.
    """

    def __init__(self, *, path: Path | None = None, text: str | None = None):
        self._lock = threading.Lock()
        self._path, self._text = path, text
        self._built: dict[str, Any] | None = None
        self._here: Any = None  # the tokenizer built here, where no child answered
        self._proc: subprocess.Popen | None
        try:
            self._proc = subprocess.Popen([sys.executable, "-c", CHILD, str(CHUNK)], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:  # no interpreter to start: ``wait`` builds it here
            self._proc = None
            return
        self._finalizer = weakref.finalize(self, _close, self._proc)
        if path is not None:
            self._send({"path": str(path)})
        else:  # the JSON as raw bytes after its length: json.dumps of it would hold the lock
            raw = (text or "").encode("utf-8")
            self._send({"bytes": len(raw)}, raw)

    def _send(self, request, raw: bytes = b"") -> None:
        if self._proc is None or self._proc.stdin is None:  # never started: its answer (none) says so
            return
        try:
            self._proc.stdin.write((json.dumps(request) + "\n").encode() + raw)
            self._proc.stdin.flush()
        except OSError:  # the child is gone: its answer (none) says so
            pass

    def _line(self) -> bytes:
        out = None if self._proc is None else self._proc.stdout
        line = b"" if out is None else out.readline()  # blocks with the interpreter lock released
        if not line:
            raise ChildFailed("the tokenizer's child process ended")
        return line

    def _answer(self) -> dict:
        answer = json.loads(self._line())
        if "error" in answer:
            raise ERRORS.get(answer["error"], ChildFailed)(answer["message"])
        return answer

    def wait(self) -> Child:
        """Wait until the tokenizer is built; raises what building it raised (``ERRORS``).

        Where the child ended without an answer (it could not import tokenizers), the tokenizer
        is built here instead."""
        self._facts()
        return self

    def _facts(self) -> dict[str, Any]:
        """The vocabulary, added tokens and unknown token, once the tokenizer is built."""
        with self._lock:
            if self._built is None:
                try:
                    built = self._answer()
                    vocab: dict[str, int] = {}
                    for _ in range(built.pop("chunks")):  # the lock is free to other threads between lines
                        vocab.update(json.loads(self._line()))
                    self._built = {**built, "vocab": vocab}
                    self._text = None  # kept only to build it here
                except ChildFailed:
                    self._built = self._build_here()
            return self._built

    def _build_here(self) -> dict[str, Any]:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(self._path)) if self._path is not None else Tokenizer.from_str(self._text or "")
        added = {str(i): [t.content, t.special] for i, t in tok.get_added_tokens_decoder().items()}
        self._here = tok
        self.close()
        return {"vocab": tok.get_vocab(with_added_tokens=True), "added": added,
                "unk_token": getattr(tok.model, "unk_token", None)}

    def encode(self, text: str, add_special_tokens: bool = True) -> Encoding:
        if self.wait()._here is not None:
            encoding = self._here.encode(text, add_special_tokens=add_special_tokens)
            return Encoding(encoding.ids, encoding.tokens)
        with self._lock:
            self._send(("encode", text, bool(add_special_tokens)))
            return Encoding(*self._answer()["value"])

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        ids = [int(i) for i in ids]
        if self.wait()._here is not None:
            return self._here.decode(ids, skip_special_tokens=skip_special_tokens)
        with self._lock:
            self._send(("decode", ids, bool(skip_special_tokens)))
            return self._answer()["value"]

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        if not with_added_tokens:
            raise ValueError("only the vocabulary with its added tokens is kept")
        return dict(self._facts()["vocab"])

    def get_added_tokens_decoder(self) -> dict[int, SimpleNamespace]:
        added = self._facts()["added"]
        return {int(i): SimpleNamespace(content=content, special=special) for i, (content, special) in added.items()}

    @property
    def model(self) -> SimpleNamespace:
        """The tokenizer's model as far as it is read: its unknown token (``base.unknown_of``)."""
        return SimpleNamespace(unk_token=self._facts()["unk_token"])

    def close(self) -> None:
        """End the child now (it also ends when this object is collected)."""
        if self._proc is not None:
            self._finalizer()


def _close(proc: subprocess.Popen) -> None:
    try:
        if proc.stdin is not None:
            proc.stdin.close()  # the child's loop reads end of file and returns
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
    finally:
        if proc.stdout is not None:
            proc.stdout.close()


# A GGUF's first open: its vocabulary read, its tokenizer built and written as JSON in a child, by the job
# its reader names (``readers.gguf``'s ``vocabulary_at``: a module and a function taking the path and a
# progress callback). The engine package's __init__ imports torch, which the GGUF header reader and the
# tokenizer builders do not need: the child stands an empty package in for it, and starts in a fraction of a
# second.
VOCABULARY_CHILD = r"""
import importlib, json, os, sys, types
from pathlib import Path
root, module, function, path = sys.argv[1:5]
sys.path.insert(0, root)
engine = types.ModuleType("attn_gui.engine")
engine.__path__ = [os.path.join(root, "attn_gui", "engine")]
sys.modules["attn_gui.engine"] = engine
job = getattr(importlib.import_module(module), function)

def reply(obj):
    sys.stdout.buffer.write((json.dumps(obj) + "\n").encode())
    sys.stdout.buffer.flush()

try:
    texts, meta = job(Path(path), lambda done, total: reply([done, total]))
except Exception as exc:
    reply({"error": type(exc).__name__, "message": exc.args[0] if len(exc.args) == 1 else str(exc)})
    sys.exit(0)
raw = {name: text.encode("utf-8") for name, text in texts.items()}
reply({"meta": meta, "bytes": {name: len(b) for name, b in raw.items()}})
for b in raw.values():
    sys.stdout.buffer.write(b)
sys.stdout.buffer.flush()
"""


def vocabulary_in_child(path: Path, progress, here, job: tuple[str, str]):
    """``job`` (a module's name and its function's) of the GGUF at ``path`` (the tokenizer's JSON and the
    facts), run in a child process: this one waits on the pipe with its interpreter lock released.
    ``progress(done, total)`` is called as the child reports; what the child raised from the data is raised
    here as the same type (``ConfigError`` among them). Where no child can be started, it ends without an
    answer or it fails for another reason, ``here()`` builds them in this process."""
    from ..base.errors import ConfigError

    errors = {**ERRORS, "ConfigError": ConfigError, "OSError": OSError}
    root = str(Path(__file__).resolve().parents[3])  # the folder that holds the attn_gui package
    try:
        proc = subprocess.Popen([sys.executable, "-c", VOCABULARY_CHILD, root, *job, str(path)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return here()
    with proc:
        assert proc.stdout is not None  # a pipe
        for line in proc.stdout:  # blocks with the interpreter lock released
            answer = json.loads(line)
            if isinstance(answer, list):
                progress(*answer)
            elif "error" in answer:
                kind = errors.get(answer["error"])
                if kind is None:  # not the data's fault (a bug, a library missing there): as here
                    return here()
                raise kind(answer["message"])
            else:
                texts = {name: proc.stdout.read(n).decode("utf-8") for name, n in answer["bytes"].items()}
                return texts, answer["meta"]
    return here()
