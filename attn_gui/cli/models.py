"""``attn-gui models``: the models already on this computer, and why one cannot be opened."""

from __future__ import annotations

import argparse

from .common import Command, one_line


def add_arguments(m: argparse.ArgumentParser) -> None:
    m.add_argument("--json", action="store_true", help="print the list as JSON instead of a table")


def run_models(args: argparse.Namespace) -> int:
    """``attn-gui models``: one row a model (where, name, size, family, the path that opens it or the reason
    it cannot be opened); with nothing found, the folders looked in; then the bundled models, installed or
    not (they are no files of those folders: "No models found" beside two installed ones misled). 0."""
    import dataclasses
    import json

    from ..engine import MODELS
    from ..engine.model.registry import install_hint, is_available
    from ..engine.readers.discover import discover
    from ..export.files import human

    result = discover()
    bundled = [(name, spec.label, is_available(name)) for name, spec in MODELS.items()]
    if args.json:
        print(json.dumps({"looked": list(result.looked), "models": [
            {**dataclasses.asdict(f), "supported": f.supported} for f in result.found],
            "bundled": [{"name": name, "label": label, "installed": ok} for name, label, ok in bundled]},
            indent=1))
        return 0
    if not result.found:
        print("No other models found; looked in " + ", ".join(result.looked))
        _print_bundled(bundled, install_hint)
        return 0
    name = max(len(f.name) for f in result.found)
    for f in result.found:
        size = "?" if f.size is None else human(f.size)
        last = f.opens if f.supported else f"cannot open: {one_line(f.reason)}"
        print(f"{f.where:12}  {f.name:{name}}  {size:>10}  {f.family or '?':12}  {last}")
    refused = sum(not f.supported for f in result.found)
    count = len(result.found)
    print(f"\n{count} model{'s' if count != 1 else ''}, {count - refused} can be opened (--model PATH)")
    _print_bundled(bundled, install_hint)
    return 0


def _print_bundled(bundled: list[tuple[str, str, bool]], install_hint) -> None:
    """The bundled models after a blank line: name, label, installed or the command that installs it."""
    name = max(len(n) for n, _, _ in bundled)
    label = max(len(lab) for _, lab, _ in bundled)
    print("\nBundled with attn-gui (--model NAME):")
    for n, lab, ok in bundled:
        print(f"  {n:{name}}  {lab:{label}}  {'installed' if ok else 'not installed: ' + install_hint(n)}")


COMMAND = Command("models", "list the models already on this computer (the Hugging Face cache, Ollama, LM Studio), "
                            "each with its size and family, and why one cannot be opened; nothing is downloaded",
                  add_arguments, run_models)
