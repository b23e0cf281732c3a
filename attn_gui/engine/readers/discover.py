"""The models already on this computer: the Hugging Face cache, Ollama's models and LM Studio's folder.

Nothing is downloaded and no weight is read: a folder's config.json and a GGUF's header only,
through ``model_spec``, so each model is listed with the one-line reason opening it would give
when it cannot be opened here. The work is bounded (``MAX_ENTRIES`` per place, ``MAX_FILES``
per folder, manifests of at most ``MANIFEST_BYTES``), symlinks are never followed into folders
(a loop is never walked), and a broken or hostile entry (a manifest that is not JSON, a link to
a missing blob, a file that is not a GGUF) is listed with its reason, never raised.

Ollama stores a model as ``blobs/sha256-HEX`` with no ``.gguf`` name, which is how a GGUF path is
recognised (``is_gguf``); each listed Ollama model gets a link named after it
(``$ATTN_GUI_CACHE_DIR/ollama/MODEL-TAG.gguf``, or the user's cache folder's) that opens it,
in the window and on the command line (``--model``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
import os
import re
import stat
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import ConfigError
from .catalog import model_spec
from ..specs.families import FAMILIES, regular

MAX_ENTRIES = 2000  # models listed from one place at most: a scan stays bounded whatever the disk holds
MAX_FILES = 10000  # files counted into one folder's size at most
MANIFEST_BYTES = 2**20  # an Ollama manifest is a few hundred bytes
HEAD_BYTES = 2**16  # a GGUF's first bytes, read for its architecture and name
DIGEST = re.compile(r"sha256:([0-9a-f]{64})")  # a manifest's layer digest: anything else could name a path
OLLAMA_MODEL = "application/vnd.ollama.image.model"
OLLAMA_REGISTRY = "registry.ollama.ai"
SYSTEM_OLLAMA = Path("/usr/share/ollama/.ollama/models")  # Linux's ollama service keeps its models here
OLLAMA_PLACES = ("Ollama", "Ollama (its Linux service)")


@dataclass(frozen=True)
class Found:
    """One model found on disk.

    Attributes
    ----------
    where : str
        The place it was found: "Hugging Face", "Ollama" or "LM Studio".
    name : str
        Its name there: "ORG/NAME" (a snapshot other than refs/main's: "ORG/NAME@REV"), Ollama's
        "MODEL:TAG", LM Studio's "PUBLISHER/REPO/FILE.gguf".
    path : str
        What is on disk: the snapshot folder, the .gguf file or Ollama's blob.
    opens : str
        The model path that opens it (``--model``, ``model_spec``): ``path``, or an Ollama model's link.
    size : int or None
        Its bytes on disk (a folder: its files, each blob counted once); None where it cannot be read.
    family : str
        The family it declares ("Llama"), or its ``model_type`` or architecture where none is read here
        ("t5"); "" where unknown.
    reason : str
        Why it cannot be opened here, in one line; "" where it can.
    """

    where: str
    name: str
    path: str
    opens: str
    size: int | None
    family: str
    reason: str = ""

    @property
    def supported(self) -> bool:
        return not self.reason


@dataclass(frozen=True)
class Discovery:
    """The models found (``found``, in the order of ``looked``, each place's by name) and every folder
    looked in (``looked``, whether it exists or not)."""

    found: tuple[Found, ...]
    looked: tuple[str, ...]
    places: tuple[str, ...] = ()  # each folder's name for people ("Hugging Face cache"), as ``looked``


def hf_hub(env) -> Path:
    """Hugging Face's cache of models, as huggingface_hub finds it: ``$HF_HUB_CACHE``, else the older
    ``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
    ``~/.cache/huggingface/hub``."""
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(key):
            return _path(env[key])
    if env.get("HF_HOME"):
        return _path(env["HF_HOME"]) / "hub"
    cache = _path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else _home(env) / ".cache"
    return cache / "huggingface" / "hub"


def _path(value: str) -> Path:
    return Path(os.path.expanduser(os.path.expandvars(value)))


def ollama_models(env) -> list[Path]:
    """Ollama's models folders: ``$OLLAMA_MODELS``, else ``~/.ollama/models`` and, where it exists, the one of
    Linux's ollama service (``SYSTEM_OLLAMA``)."""
    if env.get("OLLAMA_MODELS"):
        return [_path(env["OLLAMA_MODELS"])]
    own = _home(env) / ".ollama" / "models"
    return [own, SYSTEM_OLLAMA] if SYSTEM_OLLAMA.is_dir() and SYSTEM_OLLAMA != own else [own]


def lm_studio_models(env) -> list[Path]:
    """LM Studio's models folders: ``~/.lmstudio/models`` and the older ``~/.cache/lm-studio/models``."""
    home = _home(env)
    return [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]


def _home(env) -> Path:
    return Path(env["HOME"]) if env.get("HOME") else Path.home()


def discover(env=None, links: Path | None = None) -> Discovery:
    """Every model in the Hugging Face cache, Ollama's and LM Studio's folders, with its size, family and
    (for one that cannot be opened here) the reason; nothing is downloaded nor loaded.

    Parameters
    ----------
    env : mapping, optional
        The environment variables to read (``HF_HUB_CACHE``, ``HF_HOME``, ``XDG_CACHE_HOME``, ``OLLAMA_MODELS``,
        ``HOME``); default ``os.environ``.
    links : Path, optional
        Where Ollama models' ``.gguf`` links go; default the cache folder's ``ollama``
        (``cache.cache_root().parent``).

    Returns
    -------
    Discovery
    """
    env = os.environ if env is None else env
    ollama, (studio, older) = ollama_models(env), lm_studio_models(env)
    in_ollama = functools.partial(_ollama, links=links)
    places: list[tuple[str, Path, Callable[[Path], Iterator[Found]]]] = [
        ("Hugging Face cache", hf_hub(env), _hf_cache),
        *((label, folder, in_ollama) for label, folder in zip(OLLAMA_PLACES[:len(ollama)], ollama, strict=True)),
        ("LM Studio", studio, _lm_studio), ("LM Studio (older folder)", older, _lm_studio)]
    found = [entry for _, folder, scan in places for entry in _bounded(scan(folder))]
    return Discovery(tuple(found), tuple(str(folder) for _, folder, _ in places),
                     tuple(label for label, _, _ in places))


def _bounded(entries) -> list[Found]:
    out: list[Found] = []
    for entry in entries:
        if len(out) == MAX_ENTRIES:
            break
        out.append(entry)
    return sorted(out, key=lambda f: f.name.lower())


def _dirs(folder: Path) -> list[os.DirEntry]:
    """The real sub-folders of ``folder`` (not links to one), by name; [] where it cannot be listed."""
    try:
        with os.scandir(folder) as it:
            entries = list(itertools.islice(it, MAX_ENTRIES))
    except OSError:
        return []
    return sorted((e for e in entries if _is_dir(e)), key=lambda e: e.name)


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


# ---------------------------------------------------------------- each model


def _model(where: str, name: str, path: Path, opens: str | None = None) -> Found:
    """The entry of the model folder or GGUF file ``path``: its size, family and the refusal opening it gives
    (``model_spec``'s, then a folder's missing weights, as ``hf.read_weights`` finds them)."""
    opens = str(path) if opens is None else opens
    try:
        size = _size(path)
    except OSError as exc:
        return Found(where, name, str(path), opens, None, "", f"{path.name} cannot be read: {_short(exc)}")
    gguf = opens.lower().endswith(".gguf")
    family = _gguf_family(Path(opens)) if gguf else _folder_family(path)
    try:
        spec = model_spec(opens)
        if not gguf and spec.module in ("decoder", "encoder"):
            from .hf.weights import weight_files

            weight_files(path)  # names only: an unfinished download lacks a shard, or its blob
    except ConfigError as exc:
        return Found(where, name, str(path), opens, size, family, _short(exc))
    except Exception as exc:  # noqa: BLE001  a hostile file must not end the scan: the bug is listed, not raised
        return Found(where, name, str(path), opens, size, family, f"{path.name}: {type(exc).__name__}: {_short(exc)}")
    return Found(where, name, str(path), opens, size, family)


def _size(path: Path) -> int:
    """The bytes of file ``path``, or of the files in folder ``path`` (each link's target counted once, a
    link to nothing not at all, links to folders never followed)."""
    if not path.is_dir():
        return os.stat(path).st_size
    total, seen, count = 0, set(), 0
    for top, _dirs_here, files in os.walk(path):  # followlinks=False: a linked folder (a loop) is never entered
        for name in files:
            count += 1
            if count > MAX_FILES:
                return total
            try:
                st = os.stat(Path(top) / name)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def _folder_family(folder: Path) -> str:
    """The family label a folder's config.json declares, else its model_type; "" where it has none."""
    from ..base.disk import json_object

    try:
        kind = json_object(folder / "config.json", "config.json").get("model_type") if regular(
            folder / "config.json") else None
    except ConfigError:
        return ""
    if isinstance(kind, str):
        return FAMILIES[kind].label if kind in FAMILIES else kind[:40]
    return ""


def _gguf_family(file: Path) -> str:
    """The family label a GGUF's header declares, else its ``general.architecture``; "" where unreadable."""
    from ..specs.families import gguf_family

    if not regular(file):
        return ""
    try:
        with open(file, "rb") as f:
            first = f.read(HEAD_BYTES)
        names = _leading_strings(first)
    except (OSError, ValueError, struct.error):  # its reason comes from model_spec
        return ""
    arch = names.get("general.architecture")
    if not arch:
        return ""
    family = gguf_family(arch, names.get("general.name", ""))
    return family.label if family is not None else arch[:40]


_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF's scalar value types


def _leading_strings(data: bytes) -> dict[str, str]:
    """The string values of a GGUF header's first keys, up to its first array: llama.cpp writes
    ``general.architecture`` and ``general.name`` there, before the vocabulary, whose hundred thousand
    strings ``read_header`` walks (a third of a second for SmolLM2's 49,152); a few bytes are read here."""
    if data[:4] != b"GGUF":
        raise ValueError("not a GGUF")
    _version, _tensors, fields = struct.unpack_from("<IQQ", data, 4)
    pos, found = 24, {}
    for _ in range(min(fields, 64)):
        (n,) = struct.unpack_from("<Q", data, pos)
        key = data[pos + 8:pos + 8 + n].decode("utf-8", errors="replace")
        pos += 8 + n
        (kind,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if kind == 8:  # a string
            (n,) = struct.unpack_from("<Q", data, pos)
            found[key] = data[pos + 8:pos + 8 + n].decode("utf-8", errors="replace")
            pos += 8 + n
        elif kind in _SIZES:
            pos += _SIZES[kind]
        else:  # an array (the vocabulary): what follows is not needed
            break
        if pos > len(data):
            break
    return found


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


# ---------------------------------------------------------------- the three places


def _hf_cache(hub: Path) -> Iterator[Found]:
    """``models--ORG--NAME/snapshots/REV/``: each snapshot with a config.json, and each GGUF in one without."""
    for repo in _dirs(hub):
        if not repo.name.startswith("models--"):
            continue  # datasets--, spaces--, .locks
        name = repo.name.removeprefix("models--").replace("--", "/")
        current = _ref(Path(repo.path) / "refs" / "main")
        for snapshot in _dirs(Path(repo.path) / "snapshots"):
            shown = name if snapshot.name == current else f"{name}@{snapshot.name[:8]}"
            folder = Path(snapshot.path)
            ggufs = _ggufs(folder)
            if ggufs and not os.path.lexists(folder / "config.json"):
                for file in ggufs:  # a repository of GGUF files (TheBloke's, bartowski's): each one a model
                    yield _model("Hugging Face", f"{shown}/{file.name}", file)
            else:
                found = _model("Hugging Face", shown, folder)
                # refusals name the folder, here a commit hash: the repository's name says more
                yield dataclasses.replace(found, reason=found.reason.replace(snapshot.name, shown, 1))


def _ref(file: Path) -> str:
    """The revision ``refs/main`` names (a 40-hex commit), "" where it names none."""
    try:
        if regular(file) and file.stat().st_size <= 256:
            text = file.read_text("ascii", errors="replace").strip()
            return text if re.fullmatch(r"[0-9a-f]{40}", text) else ""
    except OSError:
        pass
    return ""


def _ggufs(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as it:
            names = [e.name for e in itertools.islice(it, MAX_ENTRIES)]
    except OSError:
        return []
    return [folder / n for n in sorted(names) if n.lower().endswith(".gguf")]


def _ollama(models: Path, links: Path | None) -> Iterator[Found]:
    """``manifests/REGISTRY/NS/MODEL/TAG``: each manifest's model layer, the blob ``blobs/sha256-HEX``."""
    for registry in _dirs(models / "manifests"):
        for namespace in _dirs(Path(registry.path)):
            for model in _dirs(Path(namespace.path)):
                try:
                    with os.scandir(model.path) as it:
                        tags = sorted(itertools.islice(it, MAX_ENTRIES), key=lambda e: e.name)
                except OSError:
                    continue
                for tag in tags:
                    prefix = "" if registry.name == OLLAMA_REGISTRY else f"{registry.name}/"
                    prefix += "" if namespace.name == "library" and not prefix else f"{namespace.name}/"
                    yield _ollama_model(models, f"{prefix}{model.name}:{tag.name}", Path(tag.path), links)


def _ollama_model(models: Path, name: str, manifest: Path, links: Path | None) -> Found:
    where = "Ollama"
    try:
        digest = _model_digest(manifest)
    except ConfigError as exc:
        return Found(where, name, str(manifest), "", None, "", f"its manifest {exc}")
    blob = models / "blobs" / f"sha256-{digest}"
    if not os.path.lexists(blob):
        return Found(where, name, str(blob), "", None, "", f"its blob sha256-{digest[:12]}… is missing")
    if not regular(blob):
        return Found(where, name, str(blob), "", None, "",
                     f"its blob sha256-{digest[:12]}… is not a regular file (a link to nothing, a loop, a FIFO)")
    try:
        link = _link(blob, name, links)
    except OSError as exc:
        return Found(where, name, str(blob), "", os.stat(blob).st_size, _gguf_family(blob),
                     f"attn-gui cannot make the .gguf link that opens it: {_short(exc)}")
    return _model(where, name, blob, str(link))


def _model_digest(manifest: Path) -> str:
    """The hex digest of a manifest's model layer; ``ConfigError`` (in one line) where it names none."""
    if not regular(manifest):
        raise ConfigError("is not a regular file")
    try:
        size = manifest.stat().st_size
        text = manifest.read_bytes() if size <= MANIFEST_BYTES else b""
    except OSError as exc:
        raise ConfigError(f"cannot be read: {_short(exc)}") from None
    if size > MANIFEST_BYTES:
        raise ConfigError(f"is {size:,} bytes, more than a manifest's {MANIFEST_BYTES:,}")
    try:
        data = json.loads(text)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ConfigError(f"is not JSON: {_short(exc)}") from None
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list):
        raise ConfigError("has no layers")
    for layer in layers:
        if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL:
            match = DIGEST.fullmatch(str(layer.get("digest")))
            if not match:
                raise ConfigError(f"names the model's blob {str(layer.get('digest'))[:80]!r}, not sha256:HEX")
            return match.group(1)
    raise ConfigError(f"has no model layer ({OLLAMA_MODEL})")


def link_folder() -> Path:
    """Where Ollama models' ``.gguf`` links go: beside the converted models' cache (``cache.cache_root``)."""
    from .cache import cache_root

    return cache_root().parent / "ollama"


def _link(blob: Path, name: str, links: Path | None) -> Path:
    """A link named after Ollama's model ``name`` ("llama3.2:3b" -> llama3.2-3b.gguf) to its ``blob``, made
    or moved to it where needed (a tag pulled again names a new blob)."""
    folder = link_folder() if links is None else links
    link = folder / (re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:120] + ".gguf")
    target = str(blob.absolute())
    with contextlib.suppress(OSError):  # no link yet, or not a link
        if os.readlink(link) == target:
            return link
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / f".{link.name}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    os.symlink(target, temporary)
    os.replace(temporary, link)  # atomic: another scan sees the old link or the new one
    return link


def _lm_studio(folder: Path) -> Iterator[Found]:
    """``PUBLISHER/REPO/*.gguf``, and a REPO folder with a config.json (a safetensors download)."""
    for publisher in _dirs(folder):
        for repo in _dirs(Path(publisher.path)):
            path = Path(repo.path)
            if os.path.lexists(path / "config.json"):
                yield _model("LM Studio", f"{publisher.name}/{repo.name}", path)
                continue
            for file in _ggufs(path):
                yield _model("LM Studio", f"{publisher.name}/{repo.name}/{file.name}", file)
