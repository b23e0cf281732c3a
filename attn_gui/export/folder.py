"""Whole exports: written into a hidden folder beside the target, then moved into place.

The target folder holds either the complete previous export or the complete new one,
whatever happens (an interrupt, a kill, a full disk, a bad input, a second export at the
same time). An export owns the files its ``manifest.json`` names:

- a target that is missing, empty or holds only a previous export is replaced whole
  (``renameat2(RENAME_EXCHANGE)`` where Linux has it, so there is no moment without one);
- a target that holds anything else is refused and left untouched, unless ``overwrite``:
  then the export's files are moved in among the others one by one, the manifest last,
  and nothing else there is deleted or changed.

A target that cannot be renamed (a mount point, such as a Docker ``-v`` folder: ``EBUSY``)
is written into instead: the export is staged inside it and its files are moved in one by
one, the manifest last; the previous export's files that the new one lacks are removed,
and nothing else there.

A killed run leaves ``.<target>.attn-gui-<pid>-<hex>.partial`` beside the target (or, for
a mount point, inside it); the next export there removes it (its process is gone). No Qt
here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import json
import os
import re
import shutil
import stat
import uuid
from collections.abc import Iterable
from pathlib import Path

from ..present.files import ReadError, WriteError, is_temp_name, read_regular
from .files import ExportError

MANIFEST = "manifest.json"
MAX_MANIFEST = 64 << 20
_UNMOVABLE = (errno.EBUSY, errno.EXDEV, errno.EPERM)  # the target itself cannot be renamed (a mount point)
_LEFTOVER = re.compile(r"\.(?P<name>.+)\.attn-gui-(?P<pid>\d+)-[0-9a-f]{8}\.(?P<kind>partial|old)")


class Cancelled(Exception):
    """The export was stopped (Ctrl-C, SIGTERM, the Cancel button); nothing changed in its folder.

    Not a ``UserError``: the command line exits 130 for it, not 2.
    """

    def __init__(self, folder: str | os.PathLike):
        self.folder = folder
        super().__init__(f"export cancelled; nothing changed in {os.fspath(folder)}")


class FolderInUse(ExportError):
    """The target folder holds files that are not an export's."""


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: someone else's process
        return True
    return True


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass


def owned_files(folder: Path) -> set[str] | None:
    """The names the export in ``folder`` owns (its manifest's files and the manifest), or None."""
    try:
        info = json.loads(read_regular(folder / MANIFEST, MAX_MANIFEST, what="manifest"))
    except (ReadError, ValueError, RecursionError):
        return None
    files = info.get("files") if isinstance(info, dict) and info.get("attn_gui_export") == 1 else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return {*files, MANIFEST}


def _ours_temp(name: str, owned: set[str] | None) -> bool:
    """A temporary file a killed ``atomic_write`` of the export's own files left (``.<owned name>.<8 hex>.tmp``);
    a person's ``.draft.0123abcd.tmp`` is not."""
    return is_temp_name(name) and name[1:].rsplit(".", 2)[0] in (owned or set()) | {MANIFEST}


def _entries(folder: Path, owned: set[str] | None = None) -> list[str]:
    """The names in ``folder``, less the temporary files a killed ``atomic_write`` of the export's files left."""
    return sorted(n for n in os.listdir(folder) if not _ours_temp(n, owned) and not _stage_of(n, folder))


def _stage_of(name: str, folder: Path) -> bool:
    """True for the hidden folder an export to ``folder`` (a mount point) writes in inside it."""
    m = _LEFTOVER.fullmatch(name)
    return m is not None and m["name"] == folder.name and m["kind"] == "partial"


def _plain_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


NAME_MAX = 255  # bytes in one path component (Linux, macOS; Windows counts 255 characters)
STAGE_EXTRA = 40  # the hidden folder's name adds ".", ".attn-gui-PID-XXXXXXXX.partial" to the target's


def _check_name_lengths(path: Path, text: str) -> None:
    """Refuse a path with a component the file system cannot hold (``OSError`` File name too long)."""
    parts = path.parts[1:]
    for i, part in enumerate(parts):
        limit = NAME_MAX - STAGE_EXTRA if i == len(parts) - 1 else NAME_MAX
        size = len(os.fsencode(part))
        if size > limit:
            raise ExportError(f"cannot write to {text[:60]}...: a folder name of {size:,} bytes is too long "
                              f"(at most {limit} here); choose a shorter name")


class Target:
    """The folder an export goes to, checked up front, and the hidden folder it is written in.

    Parameters
    ----------
    folder : path-like
        The target as the user named it (created with its parents if missing).
    overwrite : bool
        Allow a target that holds other files: the export's files go in among them.

    Raises
    ------
    ExportError
        An empty name, a dangling link, a file where the folder should be, or (without
        ``overwrite``) a folder holding other files; nothing is written.
    WriteError
        The folder or its parent cannot be written.
    """

    def __init__(self, folder: str | os.PathLike, overwrite: bool = False):
        text = os.fspath(folder)
        self.shown = text
        if not text.strip():
            raise ExportError("the output folder name is empty; name a folder, e.g. --out figs")
        path = Path(os.path.abspath(text))
        _check_name_lengths(path, text)
        if path.is_symlink():
            try:
                path = path.resolve(strict=True)
            except FileNotFoundError:
                raise ExportError(f"{text} is a symbolic link to {os.readlink(path)}, which does not exist"
                                  ) from None
            except (RuntimeError, OSError):
                raise ExportError(f"{text} is a symbolic link loop") from None
        if path.parent == path:
            raise ExportError(f"cannot export into {text}: choose a folder inside it")
        self.path, self.overwrite = path, overwrite
        self.stage: Path | None = None
        self.inside = False  # a mount point: staged and written inside it (it cannot be renamed)
        self.owned: set[str] = set()  # the names the previous export there owns
        self._check()

    def _check(self) -> None:
        path, text = self.path, self.shown
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            self.kind, self.inside = "new", False
            return
        except OSError as exc:
            raise WriteError(f"cannot write to {text}: {exc.strerror or exc}") from None
        if not stat.S_ISDIR(mode):
            raise ExportError(f"cannot write to {text}: it is a file, not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise WriteError(f"cannot write to {text}: Permission denied")
        self.inside = os.path.ismount(path)  # a mount point is written into, not renamed
        owned = owned_files(path)
        names = _entries(path, owned)
        self.owned = owned if owned is not None else set()
        if not names:
            self.kind = "empty"
        elif owned is not None and set(names) <= owned and all(_plain_file(path / n) for n in names):
            self.kind = "export"
        elif self.overwrite:
            self.kind = "among"
        else:
            others = [n for n in names if owned is None or n not in owned]
            shown = ", ".join(repr(n[:40]) for n in others[:3]) + (" ..." if len(others) > 3 else "")
            raise FolderInUse(f"{text} holds files that are not an export's ({shown}); choose a new or empty "
                              f"folder, or pass --overwrite to write the export among them")

    def check_names(self, names: Iterable[str]) -> None:
        """Refuse, before writing, a name the export cannot take in the target (a folder of that name)."""
        if self.kind != "among":
            return
        for name in names:
            p = self.path / name
            if os.path.lexists(p) and not _plain_file(p):
                raise ExportError(f"{self.shown} has a folder or link named {name!r}; the export cannot write "
                                  f"its file there")

    def clean_leftovers(self) -> None:
        """Remove what killed exports to this target left: hidden folders, temporary files."""
        parent = self.path.parent
        try:
            siblings = os.listdir(parent)
        except OSError:
            return
        if self.path.is_dir():  # a mount point's own hidden folders
            for name in os.listdir(self.path):
                m = _LEFTOVER.fullmatch(name)
                if _stage_of(name, self.path) and m is not None and not _alive(int(m["pid"])):
                    _remove(self.path / name)
        for name in siblings:
            m = _LEFTOVER.fullmatch(name)
            if m is None or m["name"] != self.path.name or _alive(int(m["pid"])):
                continue
            if m["kind"] == "old" and not os.path.lexists(self.path):
                os.rename(parent / name, self.path)  # killed between moving the old out and the new in
                self._check()
            else:
                _remove(parent / name)
        if self.path.is_dir():
            owned = owned_files(self.path) or set()
            for name in os.listdir(self.path):
                if _ours_temp(name, owned):
                    _remove(self.path / name)

    def open(self) -> Path:
        """Make the hidden folder to write in (beside the target, or inside a mount point) and return it."""
        self.clean_leftovers()
        parent = self.path if self.inside else self.path.parent
        name = f".{self.path.name}.attn-gui-{os.getpid()}-{uuid.uuid4().hex[:8]}.partial"
        try:
            parent.mkdir(parents=True, exist_ok=True)
            (parent / name).mkdir()
        except OSError as exc:
            reason = "a file is in the way" if isinstance(exc, FileExistsError) else (exc.strerror or str(exc))
            raise WriteError(f"cannot write to {self.shown}: {reason}") from None
        self.stage = parent / name
        return self.stage

    def abort(self) -> None:
        """Remove the hidden folder; the target is as it was."""
        if self.stage is not None:
            _remove(self.stage)
            self.stage = None

    def commit(self, names: list[str]) -> None:
        """Move the written export into place (``names`` in order, the manifest last)."""
        stage = self.stage
        assert stage is not None, "commit() after open()"
        try:
            if self.kind == "among" or self.inside:
                self._move_in(names)
            else:
                try:
                    self._replace_whole()
                except OSError as exc:  # nothing was moved: the target itself cannot be renamed
                    if exc.errno not in _UNMOVABLE or self.stage is None:
                        raise
                    self._move_in(names)
        except OSError as exc:
            if isinstance(exc, ExportError):
                raise
            raise WriteError(f"cannot move the export into {self.shown}: {exc.strerror or exc}") from None
        finally:
            self.abort()

    def _move_in(self, names: list[str]) -> None:
        """Move the export's files into the target one by one (the manifest last); then remove the previous
        export's files that the new one lacks (not among others' files: ``overwrite`` keeps what it finds)."""
        stage, path = self.stage, self.path
        assert stage is not None
        for name in names:
            try:
                os.replace(stage / name, path / name)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                tmp = path / f".{name}.{uuid.uuid4().hex[:8]}.tmp"  # another file system: copy, then rename
                shutil.copyfile(stage / name, tmp)
                os.replace(tmp, path / name)
        if self.kind == "export":
            for name in sorted(self.owned - set(names)):
                if _plain_file(path / name):
                    _remove(path / name)

    def _replace_whole(self) -> None:
        stage, path = self.stage, self.path
        assert stage is not None
        if self.kind in ("new", "empty"):
            try:
                os.rename(stage, path)  # POSIX: replaces an empty folder in one step
                self.stage = None
                return
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            self._check()  # another export got there first: replace it, or refuse other files
            if self.kind == "among":
                raise FolderInUse(f"{self.shown} was filled by something else during the export; "
                                  f"nothing was changed there")
        if _exchange(stage, path):
            self.stage = None
            self._retire(stage)  # the stage holds the previous export now
            return
        old = path.parent / f".{path.name}.attn-gui-{os.getpid()}-{uuid.uuid4().hex[:8]}.old"
        os.rename(path, old)
        os.rename(stage, path)
        self.stage = None
        self._retire(old)

    def _retire(self, old: Path) -> None:
        """Remove the previous export moved out of the target: only the names it owned (and the temporary
        files of those); anything else found there (a file saved into the folder during the export) goes back
        into the target, or, where the new export took its name, stays in ``old`` and is said."""
        for name in os.listdir(old):
            if (name in self.owned or _ours_temp(name, self.owned)) and _plain_file(old / name):
                _remove(old / name)
        for name in os.listdir(old):
            if not os.path.lexists(self.path / name):
                os.rename(old / name, self.path / name)
        try:
            os.rmdir(old)
        except OSError:
            kept = self.path.parent / f"{self.path.name}.kept-{uuid.uuid4().hex[:8]}"
            os.rename(old, kept)
            raise ExportError(f"the export was written to {self.shown}, but files saved there during it had "
                              f"its files' names: they are kept in {kept}") from None


def unwritable(exc: OSError, target: Target) -> WriteError:
    """``exc`` (a full disk, a file system gone read-only) while an export is written, as one line naming the
    target; a ``WriteError`` as it is."""
    if isinstance(exc, WriteError):
        return exc
    return WriteError(f"cannot write to {target.shown}: {exc.strerror or exc}; nothing was changed there")


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2``); False where that is not available."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):  # old kernel, or a file system without it
        return False
    raise OSError(err, os.strerror(err))
