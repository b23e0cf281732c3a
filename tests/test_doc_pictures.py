"""Every picture the docs show is one ``make screenshots`` makes (``tools/screenshots.py: PICTURES``), so none
goes stale: a picture referenced from docs/**/*.md, README.md or mkdocs.yml that the script does not make
fails, and so does a PNG under docs/ that no page shows or a script entry that no page shows."""

import importlib.util
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
LINK = re.compile(r"\]\(([^)\s]+\.(?:png|svg|gif|jpe?g))\)")  # a markdown image, or a link to a picture
NAMED = re.compile(r"`(docs/[\w./-]+\.(?:png|svg|gif|jpe?g))`")  # a picture named in the text ("`docs/x.png`")
YAML = re.compile(r"^\s*(?:logo|favicon):\s*(\S+)", re.M)  # mkdocs.yml's pictures, under docs/


def script():
    spec = importlib.util.spec_from_file_location("screenshots", REPO / "tools" / "screenshots.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass reads its own module
    spec.loader.exec_module(module)
    return module


def referenced() -> dict[str, str]:
    """Each picture the docs reference, as its path under docs/, with a page that references it."""
    found = {}
    for page in [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        targets = [page.parent / t for t in LINK.findall(text) if "://" not in t]
        targets += [REPO / t for t in NAMED.findall(text)]
        for target in targets:
            path = target.resolve()
            assert path.is_relative_to(DOCS), f"{page.relative_to(REPO)} shows {target}, outside docs/"
            found.setdefault(path.relative_to(DOCS).as_posix(), str(page.relative_to(REPO)))
    for target in YAML.findall((REPO / "mkdocs.yml").read_text(encoding="utf-8")):
        found.setdefault(target, "mkdocs.yml")
    return found


def test_every_picture_the_docs_show_is_made_by_the_script():
    made = {picture.path for picture in script().PICTURES}
    shown = referenced()
    assert len(shown) >= 38  # the patterns find the docs' pictures (38 when this test was written)
    stale = {path: page for path, page in shown.items() if path not in made}
    assert not stale, f"shown but not made by tools/screenshots.py (add an entry to PICTURES): {stale}"
    missing = sorted(path for path in shown if not (DOCS / path).is_file())
    assert not missing, f"shown but not in docs/ (run make screenshots): {missing}"


def test_no_picture_lies_in_docs_unshown_and_no_entry_makes_one():
    pictures = script().PICTURES
    paths = [picture.path for picture in pictures]
    assert len(paths) == len(set(paths)), "two entries write one file"
    shown = referenced()
    assert not set(paths) - set(shown), f"made but shown nowhere: {sorted(set(paths) - set(shown))}"
    unshown = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.png")
                     if p.relative_to(DOCS).as_posix() not in shown)
    assert not unshown, f"pictures under docs/ that no page shows (stale): {unshown}"
