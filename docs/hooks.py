"""MkDocs hooks and the command-line reference: docs/cli.md holds the reference generated from the argparse
parsers between ``<!-- cli-reference -->`` and ``<!-- /cli-reference -->``, so that the page reads as the real
reference in the repository too. ``python docs/hooks.py`` writes it again after a change of the parsers
(tests/test_cli_reference.py says when it is due); the site's build puts the current one in."""

import argparse
import os
import re
import sys
from pathlib import Path

MARKER, END = "<!-- cli-reference -->", "<!-- /cli-reference -->"
PAGE = Path(__file__).with_name("cli.md")


def reference() -> str:
    """Every command's ``--help``, as markdown sections."""
    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal's width; a fixed one for the page
    from attn_gui.cli import build_parser

    parser = build_parser()
    out = ["## attn-gui", "", "```text", parser.format_help().rstrip(), "```", ""]

    def commands(parser: argparse.ArgumentParser, prefix: str) -> None:  # a command's own subcommands too
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    out.extend([f"## {prefix} {name}", "", "```text", sub.format_help().rstrip(), "```", ""])
                    commands(sub, f"{prefix} {name}")

    commands(parser, "attn-gui")
    return "\n".join(out)


def with_reference(markdown: str) -> str:
    """``markdown`` with the block between the markers replaced by the current reference."""
    block = f"{MARKER}\n{reference()}\n{END}"
    return re.sub(re.escape(MARKER) + r".*?" + re.escape(END), lambda _: block, markdown, flags=re.S)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return with_reference(markdown) if MARKER in markdown else markdown


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    PAGE.write_text(with_reference(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PAGE}")
