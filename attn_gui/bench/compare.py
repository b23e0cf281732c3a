"""``attn-gui bench --compare REV``: the window's actions timed in this tree and in REV, in turns.

REV is a commit of this checkout (written out with ``git archive`` into a temporary folder) or a
folder holding an ``attn_gui`` package. Each tree runs ``bench/window_actions.py``, this tree's
file, in a fresh interpreter whose ``attn_gui`` is that tree's (its folder first on the path), so
both are timed by the same code. The actions go in groups (the quick changes and keystrokes
together; the large compute, SmolLM2 and the Train dock each alone), each group run by both trees
in turn, the first of the two swapped every time, for a number of rounds: a busy spell of a
shared machine falls on both alike. No Qt is imported here.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .timing import PROJECT_ROOT, Log, last_error_line

ACTIONS_FILE = Path(__file__).with_name("window_actions.py")
# loads this tree's actions by path, so that ``import attn_gui`` inside them finds the tree on the path
PROBE = ("import importlib.util, sys\n"
         "spec = importlib.util.spec_from_file_location('attn_gui_window_actions', sys.argv[1])\n"
         "module = importlib.util.module_from_spec(spec)\n"
         "spec.loader.exec_module(module)\n"
         "module.main(sys.argv[2:])\n")
TIMEOUT_S = 1800


class CompareError(ValueError):
    """``--compare`` cannot run: REV is neither a folder with ``attn_gui`` nor a commit, or a tree failed."""


def _git(*args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True, timeout=120)
    except FileNotFoundError as exc:
        raise CompareError("--compare needs git to write a commit out (or give a folder holding attn_gui)") from exc


def check_rev(rev: str) -> None:
    """Fail now (``CompareError``, one line) if ``rev`` is neither a folder holding ``attn_gui`` nor a commit of
    this checkout: before minutes of measuring, not after."""
    if not (Path(rev).expanduser() / "attn_gui" / "__init__.py").is_file() and _git(
            "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").returncode != 0:
        raise CompareError(f"--compare {rev}: neither a folder holding attn_gui nor a commit of {PROJECT_ROOT}")


@contextlib.contextmanager
def tree_of(rev: str) -> Iterator[tuple[Path, str]]:
    """A folder whose ``attn_gui`` is ``rev``'s, and its label: a folder given is used as it is; a commit of this
    checkout is written out into a temporary folder, removed afterwards (its ``resources`` moved into the
    package, where an installed one has them)."""
    folder = Path(rev).expanduser()
    if (folder / "attn_gui" / "__init__.py").is_file():
        yield folder.resolve(), folder.name or str(folder)
        return
    found = _git("rev-parse", "--verify", "--quiet", "--short", f"{rev}^{{commit}}")
    if found.returncode != 0:
        raise CompareError(f"--compare {rev}: neither a folder holding attn_gui nor a commit of {PROJECT_ROOT}")
    short = found.stdout.decode().strip()
    archive = _git("archive", "--format=tar", short)
    if archive.returncode != 0:
        raise CompareError(f"--compare {rev}: git archive failed: {archive.stderr.decode().strip()}")
    with tempfile.TemporaryDirectory(prefix=f"attn-gui-{short}-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.12 and the security releases before it
                tar.extractall(tmp, filter="data")
            else:
                tar.extractall(tmp)
        resources, package = Path(tmp) / "resources", Path(tmp) / "attn_gui" / "resources"
        if resources.is_dir() and not package.exists():
            resources.rename(package)
        yield Path(tmp), short


def run_in(tree: Path, actions: list[dict[str, Any]]) -> dict[str, Any]:
    """Run ``actions`` (``window_actions.run_action``) in a fresh interpreter whose ``attn_gui`` is ``tree``'s;
    its JSON answer: each action's samples (or error) and the load average before and after."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), env.get("PYTHONPATH")) if p)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    proc = subprocess.run([sys.executable, "-c", PROBE, str(ACTIONS_FILE), json.dumps(actions)], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise CompareError(f"the window's actions failed in {tree}: {last_error_line(proc)}")
    return json.loads(lines[-1])


def groups_of(actions: list[dict[str, Any]]) -> list[list[int]]:
    """The actions run by one interpreter: the changes and keystrokes together, every other action alone."""
    quick = [i for i, a in enumerate(actions) if a["kind"] in ("update", "typing")]
    return ([quick] if quick else []) + [[i] for i, a in enumerate(actions) if a["kind"] not in ("update", "typing")]


def _merge(into: dict[str, Any], result: dict[str, Any], load: list[float]) -> None:
    """Add one run's samples of an action to ``into`` (``samples``: lists by key; an error is kept)."""
    samples = into.setdefault("samples", {})
    into.setdefault("load", []).append([round(x, 2) for x in load])
    if "error" in result:
        samples["error"] = result["error"]
        return
    for key, values in result.items():
        samples.setdefault(key, []).extend(values)


def compare_trees(actions: list[dict[str, Any]], rev: str, rounds: int, log: Log,
                  describe: Callable[[dict[str, Any]], str]) -> tuple[list[dict], list[dict], str]:
    """Run ``actions`` ``rounds`` times in this tree and in ``rev``, group by group, in turns (the first of the
    two swapped each time). Returns, for this tree and for ``rev``, each action's merged ``samples`` and
    ``load`` averages, and ``rev``'s label."""
    ours: list[dict] = [{} for _ in actions]
    theirs: list[dict] = [{} for _ in actions]
    with tree_of(rev) as (other, label):
        turn = 0
        for r in range(rounds):
            for group in groups_of(actions):
                names = "; ".join(describe(actions[i]).removeprefix("window: ").removesuffix(" ...") for i in group)
                log(f"window against {label}, round {r + 1} of {rounds}: {names} ...")
                trees = [(PROJECT_ROOT, ours), (other, theirs)]
                for tree, into in trees if turn % 2 == 0 else trees[::-1]:
                    answer = run_in(tree, [actions[i] for i in group])
                    for i, result in zip(group, answer["results"], strict=True):
                        _merge(into[i], result, answer["load"])
                turn += 1
    return ours, theirs, label
