"""docs/cli.md is the real command reference in the repository (issue 47: it read as a placeholder, its
reference made only when the site was built), and the README and docs/index.md name the same commands."""

import argparse
import re
import sys
from pathlib import Path

from attn_gui.cli import build_parser

REPO = Path(__file__).resolve().parents[1]


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_the_page_holds_every_command_and_every_flag():
    """Every command has its section and every flag of it appears there (``python docs/hooks.py`` writes it
    again; argparse's layout differs between Pythons, so the flags are read, not the text compared)."""
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## attn-gui (\w+)\n(.*?)(?=^## |\Z)", page, flags=re.S | re.M))
    for name, parser in commands().items():
        assert name in sections, f"docs/cli.md has no section for {name}: run python docs/hooks.py"
        for action in parser._actions:
            for flag in action.option_strings:
                assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", sections[name]), (
                    f"{name} {flag} is not in docs/cli.md: run python docs/hooks.py")
        assert f"| `{name}`" in page  # in the table of commands too


def test_the_hook_writes_the_reference_between_its_markers():
    sys.path.insert(0, str(REPO / "docs"))
    try:
        import hooks
    finally:
        sys.path.remove(str(REPO / "docs"))
    page = f"intro\n{hooks.MARKER}\nSTALE REFERENCE\n{hooks.END}\nafter\n"
    written = hooks.with_reference(page)
    assert written.startswith("intro\n<!-- cli-reference -->\n## attn-gui\n")
    assert written.endswith(f"{hooks.END}\nafter\n")
    assert "STALE REFERENCE" not in written and hooks.with_reference(written) == written


def test_the_readme_and_the_index_name_every_command():
    names = set(commands()) - {"gui"}  # the window: the default, named in the tour's other lines
    for page in (REPO / "README.md", REPO / "docs" / "index.md"):
        line = re.search(r"10\. The same from a shell: (.*?)\(\[command line\]", page.read_text(), flags=re.S)
        assert line is not None, page
        assert set(re.findall(r"`(?:attn-gui )?(\w+)`", line.group(1))) == names, page
