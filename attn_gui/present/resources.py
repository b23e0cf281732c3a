"""Read the shipped resources (example sentences, icon) from the installed package."""

from __future__ import annotations

from importlib import resources


def read_text(name: str) -> str:
    return resources.files("attn_gui.resources").joinpath(name).read_text(encoding="utf-8")


def path_of(name: str) -> str:
    """A file-system path of a resource (the package is installed as files, not zipped)."""
    return str(resources.files("attn_gui.resources").joinpath(name))


def example_sentences() -> list[str]:
    """The example sentences, in file order, without comments or blank lines."""
    lines = (line.strip() for line in read_text("examples.txt").splitlines())
    return [line for line in lines if line and not line.startswith("#")]
