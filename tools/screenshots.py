"""``make screenshots``: the window's pictures, and every picture the docs show, rendered offscreen.

    python tools/screenshots.py [OUT] [--sizes 1366x768,1920x1080] [--only NAME,...] [--docs DOCS] [--heavy]

For each screen size: the default with alpha in focus, every map, each dock in front (the
insight docks on the default, the decoder's docks on SmolLM2-135M), a real model (SmolLM2-135M,
MiniLM-L6) and a long input (700 tokens). Each picture is ``OUT/NAME-WxH.png``; a model that is
not installed is skipped with a line saying so.

``--docs DOCS`` also writes every picture the docs show (``PICTURES``: the window in a given state
with a dock in front, or a file a command writes, such as the exported α or the page in headless
Chromium) into DOCS, under the path the docs name. ``--heavy`` includes those that take minutes of
compute (a census of 400 passages, a decoder over 1,032 tokens, 1,400 and 2,005 training steps).
``tests/test_doc_pictures.py`` checks that every picture the docs reference is one of ``PICTURES``, so
none goes stale. The settings are a fresh temporary folder: no picture depends on the saved state.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SIZES = ((1366, 768), (1920, 1080))
WORDS = ["the", "animal", "did", "not", "cross", "the", "street", "because", "it", "was", "too", "tired"]
LONG = " ".join(itertools.islice(itertools.cycle(WORDS), 700))
WORDS64 = " ".join(itertools.islice(itertools.cycle(WORDS), 64))
LONGER = " ".join(itertools.islice(itertools.cycle(WORDS), 1032))  # SmolLM2 reads each word as one token
LONGEST = " ".join(itertools.islice(itertools.cycle(WORDS), 1499))  # streamed: past the 512-token full run
DECODER, ENCODER = "smollm2-135m", "minilm-l6"
# the docks that show a decoder's numbers: pictured on SmolLM2, the others on the default random weights
DECODER_DOCKS = ("model-view", "kv-cache", "interventions", "why")
REPO = Path(__file__).resolve().parents[1]
CAPITAL = "The capital of France is"
ANIMAL = "The animal didn't cross the street because it was too tired"
TINY = "tiny:"  # a model "tiny:KIND" is a tiny random checkpoint of that family, made by transformers for the picture


@dataclass(frozen=True)
class Picture:
    """One picture the docs show, at ``path`` under docs/.

    The window at ``size`` on ``preset`` (or the default config) with ``config`` changes, ``focus``,
    ``head`` and ``token`` (0-based), ``dock`` in front; then ``act`` (a name in ``ACTS``) clicks what the
    picture needs and may name the widget to grab; ``dock_share``: a dock that shows more than a fifth.
    With ``make`` (a name in ``MAKERS``) a command writes the file instead of the
    window. ``needs``: the bundled models it shows; ``heavy``: minutes of compute.
    """

    path: str
    config: dict = field(default_factory=dict)
    preset: str | None = None
    focus: str | None = "weights"
    head: int = 0
    token: int | None = 1
    dock: str | None = None
    size: tuple[int, int] = (1366, 768)
    act: str | None = None
    make: str | None = None
    needs: tuple[str, ...] = ()
    heavy: bool = False
    dock_share: float | None = None  # the dock's share of the height (the window gives it a fifth)



def _variant(name: str, preset: str, focus: str, **kw) -> Picture:
    return Picture(f"variants/{name}.png", preset=preset, focus=focus, size=(1366, 740), **kw)


SMOL = dict(model=DECODER, sentence=CAPITAL)
WHY = dict(config=dict(SMOL, layer=23), focus=None, head=4, dock="why", needs=(DECODER,), dock_share=0.41)
MODEL_VIEW = dict(dock="model-view", dock_share=0.37)
FOLDER = dict(dock="model-view", dock_share=0.32)
TRAIN = dict(focus=None, dock="train", dock_share=0.33)  # its curves and mosaic need a third
PICTURES: tuple[Picture, ...] = (
    # the front page and the window guide
    Picture("screenshot.png"),
    Picture("screenshot-1920.png", size=(1920, 1080)),
    Picture("canvas/default-1366x768.png"),
    Picture("canvas/heads8-T64-1920x1080.png", size=(1920, 1080),
            config=dict(heads=8, d_model=256, seed=123, sentence=WORDS64)),
    # today's attention: each variant preset, focused on the map that shows it
    _variant("rope-angles", "rope", "rope_angles"),
    _variant("rope-k-before-rotation", "rope", "k_unrotated"),
    _variant("rope-shift", "rope", "scores", dock="difference", act="shift"),
    _variant("alibi-bias", "alibi", "position_bias"),
    _variant("grouped-query-k", "grouped-query", "k"),
    _variant("sliding-window-alpha", "sliding-window", "weights"),
    _variant("attention-sinks-alpha", "attention-sinks", "weights"),
    _variant("annotated-transformer-biases", "annotated-transformer", "q"),
    _variant("cross-attention-alpha", "cross-attention", "weights"),
    # real models
    Picture("model-mode.png", config=dict(model=ENCODER, sentence=ANIMAL, layer=3), head=1, token=10,
            needs=(ENCODER,), **MODEL_VIEW),
    Picture("decoder.png", config=dict(SMOL, layer=4), needs=(DECODER,), **MODEL_VIEW),
    Picture("open-model-1366.png", act="open_model", needs=(DECODER,)),
    Picture("open-model-1920.png", size=(1920, 1080), act="open_model", needs=(DECODER,)),
    Picture("model-folder-deberta-v3.png", config=dict(model=TINY + "deberta-v3"), **FOLDER,
            focus="c2p"),
    Picture("model-folder-qwen2.png", config=dict(model=TINY + "qwen2", layer=1), **FOLDER),
    Picture("model-folder-gpt2.png", config=dict(model=TINY + "gpt2"), **FOLDER),
    Picture("model-folder-qwen3.png", config=dict(model=TINY + "qwen3"), **FOLDER, focus=None),
    Picture("model-folder-gemma2.png", config=dict(model=TINY + "gemma2"), **FOLDER, focus="capped"),
    # the docks
    Picture("interventions-dock.png", config=dict(SMOL, ablate=((0, 4), (2, 1), (12, 7))), dock="interventions",
            act="effects", needs=(DECODER,), dock_share=0.36),
    Picture("why-dock.png", act="why", **WHY),
    Picture("why-dock-score.png", act="why_score", **WHY),
    Picture("why-dock-circuits.png", act="why_circuits", **WHY),
    Picture("why-model-view.png", act="why_model_view", **WHY),
    Picture("train-dock.png", **TRAIN, act="train_305"),
    Picture("train-dock-during.png", **TRAIN, act="train_90"),
    Picture("train-dock-after.png", **TRAIN, act="train_1400", heavy=True),
    Picture("train-dock-learned.png", **TRAIN, act="train_learned_2005", heavy=True),
    Picture("corpus-dock.png", config=SMOL, dock="corpus", act="corpus_previous", needs=(DECODER,), heavy=True,
            dock_share=0.38),
    Picture("corpus-dock-dla.png", config=SMOL, dock="corpus", act="corpus_dla", needs=(DECODER,), heavy=True,
            dock_share=0.38),
    # files that commands write
    Picture("export-weights.png", make="export_weights"),
    Picture("page-hover.png", make="page_hover", needs=(ENCODER,)),
    Picture("why-dla-smollm2.png", make="attribute", needs=(DECODER,)),
    Picture("circuit-edge-1366x768.png", make="circuit_edge", heavy=True),
    Picture("circuit-ioi-smollm2.png", make="circuit_ioi", needs=(DECODER,), heavy=True),
    # the first 9-head frame drawn in steps (benchmarks.md): SmolLM2 on the default sentence
    Picture("firstframe-smollm2-focus-1366x768.png", config=dict(model=DECODER), dock="model-view",
            needs=(DECODER,)),
    Picture("firstframe-smollm2-all-1920x1080.png", size=(1920, 1080), config=dict(model=DECODER), focus=None,
            dock="model-view", needs=(DECODER,)),
    # a decoder over a long input (benchmarks.md): about 7 minutes of one loaded core
    Picture("long-model-view-1366x768.png", config=dict(model=DECODER, sentence=LONGER), dock="model-view",
            needs=(DECODER,), heavy=True),
    Picture("long-model-view-1920x1080.png", size=(1920, 1080), config=dict(model=DECODER, sentence=LONGER),
            dock="model-view", needs=(DECODER,), heavy=True),
    # a streamed decoder input and what the status bar says is held (benchmarks.md): minutes of a core
    Picture("stream-long-smollm2-1366x768.png", config=dict(model=DECODER, sentence=LONGEST), needs=(DECODER,),
            heavy=True),
    Picture("stream-long-smollm2-1920x1080.png", size=(1920, 1080), config=dict(model=DECODER, sentence=LONGEST),
            needs=(DECODER,), heavy=True),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="out/screenshots", help="the folder (default %(default)s)")
    parser.add_argument("--sizes", default=",".join(f"{w}x{h}" for w, h in SIZES), help="WxH,... (default %(default)s)")
    parser.add_argument("--only", default="", help="NAME,...: only these pictures (e.g. focus,dock-why,"
                                                   "variants/rope-shift)")
    parser.add_argument("--docs", metavar="DOCS", help="also write every picture the docs show (PICTURES) into DOCS")
    parser.add_argument("--heavy", action="store_true", help="with --docs: also those that take minutes")
    args = parser.parse_args(argv)
    sizes = [tuple(int(n) for n in size.split("x")) for size in args.sizes.split(",")]
    only = {name.removesuffix(".png") for name in args.only.split(",") if name}  # "why-dock.png" as "why-dock"
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["ATTN_GUI_CONFIG_DIR"] = tempfile.mkdtemp(prefix="attn-gui-shots-")  # a first start, every time
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from attn_gui.engine import AttentionConfig
    from attn_gui.engine.model.registry import install_hint, is_available
    from attn_gui.present.state import DOCKS, ViewState
    from attn_gui.ui.app import prepare_app

    app = prepare_app()
    sys.excepthook = sys.__excepthook__  # an error here ends the run with its traceback, not a modal dialog
    models = {name: is_available(name) for name in (DECODER, ENCODER)}
    for name, there in models.items():
        if not there:
            print(f"screenshots: {name} is not installed ({install_hint(name)}): its pictures are skipped")
    default = AttentionConfig()
    decoder = default.replace(model=DECODER, sentence=CAPITAL)
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
    pictures = [picture for picture in PICTURES if not only or _named(picture, only)] if args.docs else []
    unknown = sorted(name for name in only if not any(shot[0] == name for shot in shots)
                     and not any(_named(picture, {name}) for picture in pictures))
    if unknown:  # a name that matched nothing made nothing, and said nothing
        print(f"screenshots: --only {','.join(unknown)}: no such picture" + ("" if args.docs else " (without --docs)"))
        return 2

    for width, height in sizes:
        for name, state, dock in shots:
            path = out / f"{name}-{width}x{height}.png"
            if not _window_picture(app, state, dock, (width, height), None, path):
                return 1
    if args.docs:
        work = Path(tempfile.mkdtemp(prefix="attn-gui-docs-pictures-"))
        for picture in pictures:
            if picture.heavy and not args.heavy:
                print(f"screenshots: {picture.path} takes minutes of compute: made with --heavy")
                continue
            missing = [model for model in picture.needs if not models[model]]
            if missing:
                print(f"screenshots: {picture.path} needs {', '.join(missing)}: skipped")
                continue
            if not _doc_picture(app, picture, Path(args.docs) / picture.path, work):
                return 1
    return 0


def _named(picture: Picture, names: set[str]) -> bool:
    """Whether ``names`` name ``picture``: its path under docs/ or its file name, without ".png"."""
    name = picture.path.removesuffix(".png")
    return name in names or Path(name).name in names


def _doc_picture(app, picture: Picture, path: Path, work: Path) -> bool:
    """Write ``picture`` to ``path``; False (said) where it could not be made."""
    from attn_gui.engine import AttentionConfig, preset
    from attn_gui.present.state import ViewState

    started = time.monotonic()
    if picture.make is not None:
        MAKERS[picture.make](path, work)
        print(f"{path} ({time.monotonic() - started:.0f} s)")
        return True
    changes = dict(picture.config)
    if str(changes.get("model", "")).startswith(TINY):
        kind = changes["model"].removeprefix(TINY)
        changes["model"] = _tiny_folder(kind, work)
        changes.setdefault("sentence", _tiny_sentence(kind))
    config = (preset(picture.preset) if picture.preset else AttentionConfig()).replace(**changes)
    state = ViewState(config, head=picture.head, token=picture.token, focus=picture.focus)
    act = ACTS[picture.act] if picture.act else None
    made = _window_picture(app, state, picture.dock, picture.size, act, path, work, picture.dock_share)
    if made:
        print(f"   ({time.monotonic() - started:.0f} s)")
    return made


def _window_picture(app, state, dock: str | None, size: tuple[int, int], act, path: Path,
                    work: Path | None = None, dock_share: float | None = None) -> bool:
    """The window on ``state`` at ``size`` with ``dock`` in front, after ``act(window, app, work)``
    (which may return another widget to grab, or a finished picture), saved at ``path``;
    with ``dock_share`` the dock in front takes that share of the height."""
    from attn_gui.ui.main_window import MainWindow
    from attn_gui.ui.settings import Settings

    os.environ["ATTN_GUI_CONFIG_DIR"] = tempfile.mkdtemp(prefix="attn-gui-shots-")  # no dock carried over
    window = MainWindow(state, settings=Settings())
    window.resize(*size)
    window.show()
    if dock is not None:
        window.show_dock(dock, keep=True)
    shown = window.wait(timeout=900)
    if shown is None or shown.config != window.state.config:
        print(f"screenshots: {path}: no result in time ({window.statusLabel.text()})")
        return False
    _settle(app, lambda: window.service.latest_id == window.frame.request_id)
    if dock_share is not None:
        from PySide6 import QtCore

        window.resizeDocks([window.show_dock(dock)], [round(window.height() * dock_share)],
                           QtCore.Qt.Orientation.Vertical)
    _steady(app, window)
    grabbed = act(window, app, work) if act is not None else None
    _settle(app, lambda: window.service.latest_id == window.frame.request_id)
    if grabbed is None or not hasattr(grabbed, "save"):
        grabbed = (grabbed or window).grab()
    path.parent.mkdir(parents=True, exist_ok=True)
    grabbed.save(str(path))
    print(path)
    window.close()
    window.deleteLater()
    _settle(app, lambda: True)
    return True


def _steady(app, widget, seconds: float = 0.5) -> None:
    """Run the event loop until ``widget`` (a window: its maps' area) has kept its size for ``seconds``: a first
    window lays its docks out (a fifth of the height) a moment after its first frame."""
    widget = getattr(widget, "canvas", widget)
    size, since, end = None, time.monotonic(), time.monotonic() + 20
    while time.monotonic() < end:
        app.processEvents()
        if widget.size() != size:
            size, since = widget.size(), time.monotonic()
        elif time.monotonic() - since >= seconds:
            return
        time.sleep(0.01)


def _settle(app, ready: Callable[[], bool], seconds: float = 0.5, timeout: float = 60) -> None:
    """Run the event loop ``seconds`` past the moment ``ready()``: queued resizes and repaints land."""
    end = time.monotonic() + timeout
    while not ready() and time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)
    if not ready():
        raise TimeoutError(f"screenshots: still waiting after {timeout:.0f} s")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)


# what a picture clicks once the window shows its state ----------------------------------------------


def _shift(window, app, work):
    """The difference dock's "Pin, then shift one position": Δω of RoPE after the sentence moved on."""
    panel = window.docks.panels["difference"]
    panel.shiftButton.click()
    _settle(app, lambda: window.frame.result.config.position_offset == 1 and "moved from" in panel.message.text())


def _why(window, app, work, then: Callable | None = None):
    """The Why dock explains " Paris" (then ``then``)."""
    panel = window.docks.panels["why"]
    _settle(app, lambda: not panel.busy, timeout=600)
    panel.tokenBox.setText(" Paris")
    panel.explain()
    _settle(app, lambda: not panel.busy, timeout=600)
    if then is not None:
        then(panel)
        _settle(app, lambda: not panel.busy, timeout=600)


def _why_score(window, app, work):
    _why(window, app, work, lambda panel: panel.show_score(window.state.head, 4, 3))  # "is" → "France"


def _why_circuits(window, app, work):
    def circuits(panel):
        panel.tabs.setCurrentIndex(3)
        panel.run_copying()

    _why(window, app, work, circuits)


def _why_model_view(window, app, work):
    _why(window, app, work, lambda panel: panel.colourBox.setChecked(True))
    window.show_dock("model-view")
    _steady(app, window.modelView, seconds=1.5)  # its grid is laid out again for the dock's size


def _effects(window, app, work):
    """The Interventions dock's "Effect of every head", to 100 %; the picture is the dock alone."""
    panel = window.docks.panels["interventions"]
    done = []
    panel.gridDone.connect(lambda: done.append(True))
    panel.effectButton.click()
    _settle(app, lambda: bool(done), timeout=900)
    return window.docks.docks["interventions"].widget()  # its contents, without the title bar


def _train(steps: int, positions: str = "rope"):
    def act(window, app, work):
        panel = window.docks.panels["train"]
        panel.positions.setCurrentIndex(panel.positions.findData(positions))
        panel.target.setValue(steps)
        panel.start.click()
        _settle(app, lambda: not panel.running and panel.step_count >= steps, timeout=1200)
    return act


def _census(work: Path) -> Path:
    """A census of SmolLM2-135M over 400 passages: lines of this repository's README and docs with 6 to 40
    words, at least half of them with a letter (made once a run, in ``work``): a Markdown table's rule of dashes
    was a passage, and the previous-token head's top five were all rules."""
    from attn_gui.cli import main as cli

    folder = work / "census"
    if not (folder / "manifest.json").exists():
        lines = [line.strip() for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
                 for line in page.read_text(encoding="utf-8").splitlines()]
        passages = [line for line in lines if 6 <= len(line.split()) <= 40
                    and 2 * sum(any(c.isalpha() for c in word) for word in line.split()) >= len(line.split())][:400]
        (work / "passages.txt").write_text("\n".join(passages) + "\n", encoding="utf-8")
        if cli(["corpus", "--model", DECODER, "--corpus", str(work / "passages.txt"), "--out", str(folder)]) != 0:
            raise RuntimeError("screenshots: the census failed")
    return folder


def _corpus(statistic: str, layer: int, head: int):
    def act(window, app, work):
        panel = window.docks.panels["corpus"]
        panel.load(_census(work))
        panel.statistic.setCurrentText(statistic)
        panel.pick(layer, head)
    return act


def _open_model(window, app, work):
    """File → Open model… over a home folder made here: a tiny Llama and a T5 (not read here) in the Hugging
    Face cache, SmolLM2 and an unfinished pull in Ollama, two GGUF files in LM Studio. The dialog is a window
    of its own: the picture lays it over the main window, centred, as a screen shows it."""
    from PySide6 import QtGui

    from attn_gui.engine.readers import discover as D
    from attn_gui.ui.models_dialog import ModelsDialog

    env, links = _disk(work)
    dialog = ModelsDialog(window, scan=lambda: D.discover(env, links))
    dialog.resize(round(window.width() * 0.7), round(window.height() * 0.7))
    dialog.show()
    _settle(app, lambda: dialog.discovery is not None, timeout=120)
    for item in dialog.items():
        if item.text(0) == "you/tiny-llama-demo":
            dialog.tree.setCurrentItem(item)
    _settle(app, lambda: True)
    picture = window.grab()
    painter = QtGui.QPainter(picture)
    painter.drawPixmap((window.width() - dialog.width()) // 2, (window.height() - dialog.height()) // 2,
                       dialog.grab())
    painter.end()
    dialog.close()
    return picture


def _disk(work: Path) -> tuple[dict, Path]:
    """The models' home folder of the Open model picture (``tests/disk_models.py`` lays them out)."""
    _tests_on_path()
    from disk_models import hf_snapshot, model_layer, ollama_manifest
    from gguf_writing import byte_level_vocab, tiny, write_gguf

    from attn_gui.engine.readers.catalog import model_spec
    from attn_gui.engine.readers.bundled import gguf_path

    home = work / "disco-shot" / "home"
    if home.exists():
        shutil.rmtree(home.parent)
    home.mkdir(parents=True)
    hub = home / ".cache" / "huggingface" / "hub"
    llama = Path(_tiny_folder("llama", work, fresh=True))
    hf_snapshot(hub, "you/tiny-llama-demo", llama)
    (work / "t5").mkdir(exist_ok=True)
    (work / "t5" / "config.json").write_text('{"model_type": "t5"}')
    hf_snapshot(hub, "google-t5/t5-small", work / "t5")
    smollm2 = gguf_path(model_spec(DECODER))
    ollama = home / ".ollama" / "models"
    digest = hashlib.sha256(smollm2.read_bytes()).hexdigest()
    (ollama / "blobs").mkdir(parents=True)
    os.symlink(smollm2, ollama / "blobs" / f"sha256-{digest}")
    ollama_manifest(ollama, "smollm2", "135m-instruct-q4_1", [model_layer(digest)])
    ollama_manifest(ollama, "llama3.2", "3b", [model_layer("c" * 64)])  # a pull that never finished
    studio = home / ".lmstudio" / "models" / "my-models"
    (studio / "qwen2-tiny").mkdir(parents=True)
    write_gguf(studio / "qwen2-tiny" / "qwen2-tiny-f32.gguf", tiny("qwen2", len(byte_level_vocab()[0]), seed=3),
               "qwen2", "qwen2", "Tiny Qwen2")
    (studio / "SmolLM2-135M").mkdir()
    os.symlink(smollm2, studio / "SmolLM2-135M" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    return {"HOME": str(home)}, home.parent / "cache" / "ollama"


ACTS: dict[str, Callable] = {
    "shift": _shift, "why": _why, "why_score": _why_score, "why_circuits": _why_circuits,
    "why_model_view": _why_model_view, "effects": _effects, "train_90": _train(90), "train_305": _train(305),
    "train_1400": _train(1400), "train_learned_2005": _train(2005, "learned"), "open_model": _open_model,
    "corpus_previous": _corpus("previous", 16, 0), "corpus_dla": _corpus("dla", 26, 6),
}


# tiny checkpoints, made by transformers as the tests make them ---------------------------------------


def _tests_on_path() -> None:
    for folder in (REPO / "tests", REPO / "tests" / "engine"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))


class _Folders:
    """``tmp_path_factory.mktemp`` for the tests' checkpoint helpers."""

    def __init__(self, work: Path):
        self.work = work

    def mktemp(self, name: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.work))


def _tiny_folder(kind: str, work: Path, fresh: bool = False) -> str:
    """A tiny random checkpoint folder of ``kind`` (as the family's tests make it): gpt2, llama, qwen2 and qwen3
    from ``tests/tiny_decoders.py`` (2 layers, 4 heads, d 32), gemma2 from ``test_gemma.py`` (3 layers, window 3),
    deberta-v3 from ``test_encoder_families.py``."""
    _tests_on_path()
    folder = work / f"tiny-{kind}"
    if folder.exists() and not fresh:
        return str(folder)
    if fresh:
        folder = Path(tempfile.mkdtemp(prefix=f"tiny-{kind}-", dir=work))
    if kind == "gemma2":
        import test_gemma as G  # its gemma2 fixture's model

        made, _ = G._tiny(_Folders(work), "gemma2", 0, attn_logit_softcapping=G.CAP,
                          rope_parameters={"rope_type": "default", "rope_theta": 500.0})
    elif kind == "deberta-v3":
        import test_encoder_families as E

        made, _ = E._checkpoint(_Folders(work), "deberta-v2", num_hidden_layers=2, **E.DEBERTA["v3"])
    else:
        from tiny_decoders import tiny_decoder

        folder.mkdir(exist_ok=True)
        tiny_decoder(kind, folder)
        return str(folder)
    shutil.move(made, folder)
    return str(folder)


def _tiny_sentence(kind: str) -> str:
    """The sentence the family's tests read with its tiny checkpoint."""
    _tests_on_path()
    if kind == "deberta-v3":
        import test_encoder_families as E

        return E.SENTENCE
    from tiny_decoders import SENTENCE

    return SENTENCE


# pictures that commands write ------------------------------------------------------------------------


def _export_weights(path: Path, work: Path) -> None:
    """``attn-gui export --preset tutorial-embedding --width 700``: its α."""
    from attn_gui.cli import main as cli

    out = work / "export"
    if cli(["export", "--preset", "tutorial-embedding", "--width", "700", "--format", "png", "--out", str(out),
            "--overwrite"]) != 0:
        raise RuntimeError("screenshots: the export failed")
    shutil.copyfile(sorted(out.glob("weights*.png"))[0], path)


def _attribute(path: Path, work: Path) -> None:
    """``attn-gui attribute --model smollm2-135m --sentence "The capital of France is" --token " Paris"``: dla.png."""
    from attn_gui.cli import main as cli

    out = work / "attribute"
    if cli(["attribute", "--model", DECODER, "--sentence", CAPITAL, "--token", " Paris", "--out", str(out)]) != 0:
        raise RuntimeError("screenshots: attn-gui attribute failed")
    shutil.copyfile(out / "dla.png", path)


HOVER = """<script>
window.addEventListener('load', function () {
  const fig = document.querySelector('figure.large'), img = fig.querySelector('img');
  const map = DATA.maps[Number(fig.dataset.index)], g = map.grid, box = img.getBoundingClientRect();
  const R = map.cells.rows.length, C = map.cells.cols.length;
  const at = (r, c) => [box.left + (g[0] + (c + 0.5) / C * (g[2] - g[0])) * box.width,
                        box.top + (g[1] + (r + 0.5) / R * (g[3] - g[1])) * box.height];
  let [x, y] = at(ROW, 0);
  img.dispatchEvent(new MouseEvent('click', {clientX: x, clientY: y, bubbles: true}));
  [x, y] = at(ROW, COL);
  img.dispatchEvent(new MouseEvent('mousemove', {clientX: x, clientY: y, bubbles: true}));
});
</script>"""


def _page_hover(path: Path, work: Path) -> None:
    """The exported page of MiniLM-L6's layer 1 in headless Chromium at 1366 x 768: "it" followed (a click on
    its row of α), the pointer on α[it → the]."""
    from attn_gui.cli import main as cli

    page = work / "page.html"
    if cli(["export", "--format", "html", "--out", str(page), "--model", ENCODER, "--layer", "1",
            "--sentence", "The cat sat on the mat because it was tired"]) != 0:
        raise RuntimeError("screenshots: the page export failed")
    hovered = work / "page-hover.html"
    script = HOVER.replace("ROW", "8").replace("COL", "1")  # from 0, [CLS] first: "it" is row 8, "the" column 1
    hovered.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise RuntimeError("screenshots: page-hover.png needs headless Chromium (apt-get install chromium)")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1366,768", "--virtual-time-budget=5000", f"--screenshot={path}", hovered.as_uri()],
                   check=True, capture_output=True, timeout=300)


INDUCTION = ["--task", "induction", "--symbols", "8", "--length", "16", "--layers", "2", "--heads", "1",
             "--d-model", "32", "--batch", "64", "--lr", "0.01", "--steps", "300", "--seed", "0"]  # lesson 7's


def _circuit_edge(path: Path, work: Path) -> None:
    """Lesson 7's model (``attn-gui train``, seconds) in the window, the Circuit dock's EAP-IG on induction, the
    L1H1 -> L2H1 k edge looked at."""
    from PySide6 import QtWidgets

    from attn_gui.cli import main as cli
    from attn_gui.engine import AttentionConfig
    from attn_gui.engine.training import probe_sentence
    from attn_gui.present.state import ViewState

    folder = work / "induction"
    if not folder.exists() and cli(["train", *INDUCTION, "--out", str(folder)]) != 0:
        raise RuntimeError("screenshots: attn-gui train failed")

    def act(window, app, work):
        panel = window.docks.panels["circuit"]
        panel.taskBox.setEditText("induction")
        panel.methodBox.setCurrentText("eap-ig")
        panel.run()
        _settle(app, lambda: panel.found is not None, timeout=600)
        panel.kSlider.setValue(6)
        g = panel.found.graph
        panel.show_edge(g.find_writer("L1H1"), g.find_reader("L2H1 k"))
        _settle(app, lambda: panel.seen is not None, timeout=120)
        _steady(app, window)

    state = ViewState(AttentionConfig(sentence=probe_sentence(folder), model=str(folder)), focus="weights")
    if not _window_picture(QtWidgets.QApplication.instance(), state, "circuit", (1366, 768), act, path, work,
                           dock_share=0.6):
        raise RuntimeError(f"screenshots: {path} was not made")


def _circuit_ioi(path: Path, work: Path) -> None:
    """``attn-gui circuit --model smollm2-135m --task ioi --method eap --pairs 10 --top 30 --no-faithfulness``:
    graph.png (docs/guide/circuits.md)."""
    from attn_gui.cli import main as cli

    out = work / "circuit-ioi"
    if cli(["circuit", "--model", DECODER, "--task", "ioi", "--method", "eap", "--pairs", "10", "--top", "30",
            "--no-faithfulness", "--out", str(out), "--overwrite"]) != 0:
        raise RuntimeError("screenshots: attn-gui circuit failed")
    shutil.copyfile(out / "graph.png", path)


MAKERS: dict[str, Callable[[Path, Path], None]] = {
    "export_weights": _export_weights, "attribute": _attribute, "page_hover": _page_hover,
    "circuit_edge": _circuit_edge, "circuit_ioi": _circuit_ioi,
}


if __name__ == "__main__":
    sys.exit(main())
