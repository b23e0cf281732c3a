"""The wheel holds every package of attn_gui: pyproject.toml lists them by hand (resources/ is mapped into the
package), and a new subpackage left out installed a wheel whose ``import attn_gui.engine`` failed (issue 49's
``attn_gui.engine.circuits``, caught only by .ci/wheel)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_with_an_init_is_in_the_wheel():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "attn_gui").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)
