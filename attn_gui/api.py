"""Attention Explorer from a Python session: ``show`` the window, ``to_html`` a page.

``import attn_gui`` stays instant: these are looked up on first use (``attn_gui.__getattr__``),
and each imports torch, Qt or a model only when called.

>>> import attn_gui
>>> window = attn_gui.show(sentence="When in doubt look intelligent", heads=2)  # doctest: +SKIP
>>> window.state.head, window.result.weights.shape  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import dataclasses
import os
from typing import Any

VIEW_OPTIONS = ("head", "token", "hide_special", "focus", "scales")  # ViewState's fields besides the config


def to_html(result, head: int = 0, token: int | None = 0, hide_special: bool = False,
            scales: dict | tuple = (), focus: str | None = None) -> str:
    """One self-contained HTML page of ``result`` (``engine.compute``'s), as ``attn-gui export --format html``
    writes it: every map with its values on hover, and the walk of each query token.

    Parameters
    ----------
    result : AttentionResult, or a window (its shown result and view state)
    head, token, hide_special, scales, focus
        What the page shows, as ``present.state.ViewState`` names them (0-based head and token).
    """
    from .export.page import page_html
    from .present.frame import make_frame

    state = getattr(result, "state", None)
    if state is not None:  # a window: what it shows
        window, result = result, result.result
        if result is None:
            raise ValueError("the window has no result yet")
        return page_html(window.frame, state.head, state.token, state.hide_special, state.scales, state.focus)
    return page_html(make_frame(0, result), head, token, hide_special, scales, focus)


def _state(model: Any, tokenizer: Any, sentence: str | None, options: dict[str, Any]):
    """The ViewState ``show`` opens on: a model object is registered first (``register``)."""
    from .engine import AttentionConfig, UserError, check_tokens_now
    from .present.state import ViewState

    view = {k: options.pop(k) for k in VIEW_OPTIONS if k in options}
    view.setdefault("focus", "weights")  # alpha first, as the window's first start shows it
    if isinstance(view.get("scales"), dict):
        view["scales"] = tuple(sorted(view["scales"].items()))
    if model is not None and not isinstance(model, str):
        from .engine.model.interop.memory import register

        model = register(model, tokenizer, name=options.pop("name", None))
    elif tokenizer is not None:
        raise UserError("a tokenizer goes with a model object: give model= too (a path or a name brings its own)")
    fields = {f.name for f in dataclasses.fields(AttentionConfig)}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise UserError(f"show() has no option {unknown[0]!r}: use AttentionConfig's fields or "
                        f"{', '.join(VIEW_OPTIONS)}")
    if model is not None:
        options["model"] = model
    if sentence is not None:
        options["sentence"] = sentence
    config = AttentionConfig(**options)
    check_tokens_now(config)  # a sentence the model cannot read: refused here, not in the window
    return ViewState(config=config, **view)


def show(model: Any = None, tokenizer: Any = None, sentence: str | None = None, *, block: bool | None = None,
         **options: Any):
    """Open the window on a model and a sentence; return it.

    Parameters
    ----------
    model : str, a transformers PreTrainedModel, a TransformerLens TransformerBridge, or None
        A bundled model's name, a Hugging Face folder or a GGUF file, or a model object in
        memory (registered with ``register``, its tokenizer from ``tokenizer``; a bridge's
        own by default); None: random weights.
    tokenizer : transformers tokenizer or tokenizers.Tokenizer, optional
        With a model object only.
    sentence : str, optional
    block : bool, optional
        Run Qt's event loop until the window closes. Default: in a plain script (no
        QApplication yet, or only the one ``to_html`` made to draw its page); under a
        running one (IPython's ``%gui qt``, a Qt program) ``show`` returns at once with a
        live window.
    **options
        ``AttentionConfig`` fields (``heads=2``, ``layer=3``, ``causal=True``, ...) and the
        view's ``head``, ``token``, ``hide_special``, ``focus``, ``scales`` (0-based head and token).

    Returns
    -------
    MainWindow
        ``window.state`` (the view state), ``window.result`` (the tensors shown, or None while
        computing), ``window.set_state(...)``. Closing it stops every worker thread.

    Raises
    ------
    UserError
        An option or a model that cannot be used, in one line, before any window opens.
    """
    state = _state(model, tokenizer, sentence, dict(options))
    from PySide6 import QtWidgets

    from .engine import UserError
    from .render.offscreen import MADE_HERE
    from .ui.app import open_window, prepare_app

    running = QtWidgets.QApplication.instance()
    # an application attn-gui made to draw pages (``to_html`` before): a plain script still, no loop runs it
    existed = running is not None and not running.property(MADE_HERE)
    if running is not None and running.platformName() == "offscreen" and running.property(MADE_HERE) \
            and (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise UserError("show() cannot open a window in this process: notebook.view() or the command line drew "
                        "offscreen first; call show() before them, or in another Python")
    app = prepare_app()
    window = open_window(state)
    window.show()
    window.raise_()
    if block if block is not None else not existed:
        app.exec()
    if not existed:  # ours: taken down at exit, before Python's teardown frees Qt objects in any order
        atexit.register(_take_down, window)
    return window


def _take_down(window) -> None:
    """Stop the workers, then delete the window (left to the interpreter's teardown, a window outliving
    its QApplication segfaulted about 1 exit in 3)."""
    import shiboken6

    from .ui.worker import stop_all

    stop_all()
    if shiboken6.isValid(window):
        shiboken6.delete(window)
