"""``make screenshots``: the window's pictures for the docs, rendered offscreen so that none goes stale.

    python tools/screenshots.py [OUT] [--sizes 1366x768,1920x1080] [--only NAME,...] [--front DOCS]

For each screen size: the default with alpha in focus, every map, each dock in front (the
insight docks on the default, the decoder's docks on SmolLM2-135M), a real model (SmolLM2-135M,
MiniLM-L6) and a long input (700 tokens). Each picture is ``OUT/NAME-WxH.png``; a model that is
not installed is skipped with a line saying so. ``--front DOCS`` also writes the pictures the docs
show (``FRONT``: the default window at both sizes) into DOCS. The settings are a fresh temporary
folder, so the pictures never depend on the machine's saved state.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

SIZES = ((1366, 768), (1920, 1080))
WORDS = ["the", "animal", "did", "not", "cross", "the", "street", "because", "it", "was", "too", "tired"]
LONG = " ".join(itertools.islice(itertools.cycle(WORDS), 700))
DECODER, ENCODER = "smollm2-135m", "minilm-l6"
# the docks that show a decoder's numbers: pictured on SmolLM2, the others on the default random weights
DECODER_DOCKS = ("model-view", "kv-cache", "interventions", "why")
FRONT = {"focus-1366x768.png": "screenshot.png", "focus-1920x1080.png": "screenshot-1920.png"}  # README, docs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="out/screenshots", help="the folder (default %(default)s)")
    parser.add_argument("--sizes", default=",".join(f"{w}x{h}" for w, h in SIZES), help="WxH,... (default %(default)s)")
    parser.add_argument("--only", default="", help="NAME,...: only these pictures (e.g. focus,dock-why)")
    parser.add_argument("--front", metavar="DOCS", help="also copy the docs' own pictures (FRONT) into DOCS")
    args = parser.parse_args(argv)
    sizes = [tuple(int(n) for n in size.split("x")) for size in args.sizes.split(",")]
    only = {name for name in args.only.split(",") if name}
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["ATTN_GUI_CONFIG_DIR"] = tempfile.mkdtemp(prefix="attn-gui-shots-")  # a first start, every time
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from attn_gui.engine import AttentionConfig
    from attn_gui.engine.sources import install_hint, is_available
    from attn_gui.present.state import DOCKS, ViewState
    from attn_gui.ui.app import prepare_app
    from attn_gui.ui.main_window import MainWindow
    from attn_gui.ui.settings import Settings

    app = prepare_app()
    models = {name: is_available(name) for name in (DECODER, ENCODER)}
    for name, there in models.items():
        if not there:
            print(f"screenshots: {name} is not installed ({install_hint(name)}): its pictures are skipped")
    default = AttentionConfig()
    decoder = default.replace(model=DECODER, sentence="The capital of France is")
    shots: list[tuple[str, ViewState, str | None]] = [  # name, state, the dock in front
        ("focus", ViewState(default, focus="weights"), None),
        ("all-maps", ViewState(default), None),
        ("long-input", ViewState(default.replace(sentence=LONG), focus="weights"), None),
    ]
    if models[DECODER]:
        shots.append(("model-smollm2", ViewState(decoder, focus="weights"), "model-view"))
    if models[ENCODER]:
        shots.append(("model-minilm", ViewState(default.replace(model=ENCODER), focus="weights"), "model-view"))
    for dock in DOCKS:
        on_decoder = dock in DECODER_DOCKS
        if on_decoder and not models[DECODER]:
            continue
        shots.append((f"dock-{dock}", ViewState(decoder if on_decoder else default, focus="weights"), dock))
    shots = [shot for shot in shots if not only or shot[0] in only]

    for width, height in sizes:
        for name, state, dock in shots:
            window = MainWindow(state, settings=Settings())
            window.resize(width, height)
            window.show()
            if dock is not None:
                window.show_dock(dock, keep=True)
            shown = window.wait(timeout=300)
            if shown is None or shown.config != window.state.config:
                print(f"screenshots: {name} at {width}x{height}: no result in time ({window.statusLabel.text()})")
                return 1
            _settle(app, lambda w=window: w.service.latest_id == w.frame.request_id)
            path = out / f"{name}-{width}x{height}.png"
            window.grab().save(str(path))
            print(path)
            if args.front and path.name in FRONT:
                shutil.copyfile(path, Path(args.front) / FRONT[path.name])
                print(Path(args.front) / FRONT[path.name])
            window.close()
            window.deleteLater()
            _settle(app, lambda: True)
    return 0


def _settle(app, ready: Callable[[], bool], seconds: float = 0.5) -> None:
    """Run the event loop ``seconds`` past the moment ``ready()``: queued resizes and repaints land."""
    end = time.monotonic() + 60
    while not ready() and time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)


if __name__ == "__main__":
    sys.exit(main())
