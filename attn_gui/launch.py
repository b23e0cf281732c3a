"""The program's entry point (``attn-gui``, ``python -m attn_gui``).

Python's own Ctrl-C handler raises KeyboardInterrupt wherever the program is, so an
interrupt during the imports before ``cli.main`` printed a traceback. From this module's
first lines on, SIGINT and SIGTERM end the program at once with one line and exit 130.
These handlers stay: one that raised KeyboardInterrupt inside Qt's or torch's C code (an
import, a paint) could abort or crash the program. Work that must stop between its steps
(an export writing, a training) asks ``cli.terminal.interrupts`` for a flag instead.
"""

import os
import signal


def _stop(signum, frame) -> None:
    os.write(2, b"attn-gui: interrupted\n")
    os._exit(130)


signal.signal(signal.SIGINT, _stop)
signal.signal(signal.SIGTERM, _stop)


def main() -> int:
    """Run ``attn-gui`` with the command line's arguments; the exit status."""
    from .cli import main as run

    return run(launched=True)
