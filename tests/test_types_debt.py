"""mypy checks the whole package in `make test` (issue 56, step 5); the modules still in debt are listed in
pyproject.toml's [[tool.mypy.overrides]] with their errors ignored. The list only shrinks: 30 modules (154 errors)
when the whole package came under mypy on 2026-12-07, against 354 errors in 45 files at cc555a8."""

import importlib.util
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MOST = 30  # lower it when a module leaves the list; never raise it


def _mypy() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]


def test_mypy_checks_the_whole_package():
    assert _mypy()["files"] == ["attn_gui"]


def test_the_debt_list_only_shrinks_and_names_real_modules():
    overrides = _mypy()["overrides"]
    debt = [m for o in overrides if o.get("ignore_errors") for m in o["module"]]
    assert len(debt) == len(set(debt)) <= MOST
    assert all(importlib.util.find_spec(m) is not None for m in debt), "a module left: take it off the list"
