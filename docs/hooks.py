"""MkDocs hooks: the command-line reference is generated from the argparse parsers at build time, so it
never goes stale (the page holds the marker ``<!-- cli-reference -->``)."""

import argparse
import os

MARKER = "<!-- cli-reference -->"


def _reference() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal's width; a fixed one for the page
    from attn_gui.cli import build_parser

    parser = build_parser()
    out = ["## attn-gui", "", "```text", parser.format_help().rstrip(), "```", ""]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += [f"## attn-gui {name}", "", "```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(out)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return markdown.replace(MARKER, _reference()) if MARKER in markdown else markdown
