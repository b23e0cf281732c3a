"""A model is looked up by name in the registry (``engine.model``) and resolved once by ``engine.model.plan``;
everything else reads a ``Plan`` (issue 56, rule 1). Counted as calls in the AST (definitions, docstrings and
comments are not calls): a module outside the allowed ones that calls ``model_spec(``, ``decoder_of(`` or
``source(`` fails here, and the modules still in debt may not call them more often."""

import ast
from collections import Counter
from pathlib import Path

import attn_gui

ROOT = Path(attn_gui.__file__).parent
NAMES = {"model_spec", "decoder_of", "source"}
ALLOWED = ("engine/model/registry.py", "engine/model/decoder/", "engine/model/encoder/", "engine/model/interop/",
           "engine/model/whole.py", "engine/model/plan.py", "bench/",  # the registry, the one resolver, the benchmarks
           "engine/readers/",  # the catalog (model_spec) and the listing of a folder's models: files before any plan
           "ui/editors.py", "ui/file_actions.py")  # the model list and the open dialog: a name is what they hold
# the one left: a config's ``dims`` in model mode reads the model's sizes from its spec (the catalog, no weights),
# as the window's controls ask a config before any plan exists (issue 56's note)
DEBT = {"engine/config/config.py": 1}


def _calls(path: Path) -> int:
    count = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
            count += name in NAMES and not (isinstance(fn, ast.Attribute) and fn.value is not None
                                            and not isinstance(fn.value, ast.Name))
    return count


def test_models_are_looked_up_by_name_only_in_the_registry():
    found = Counter()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith(ALLOWED):
            found[rel] = _calls(path)
    over = {rel: n for rel, n in found.items() if n > DEBT.get(rel, 0)}
    assert not over, f"look the model up through its plan (engine.model.plan), not by name: {over}"
