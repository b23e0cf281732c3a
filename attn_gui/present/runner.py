"""Latest wins: each request carries an id; only the newest is computed and shown.

Like napari's slicer: a request superseded before the worker reaches it is never
computed, and an outcome whose id is not the latest is dropped. No Qt here: the
window's ``ui.worker.ComputeService`` runs this on a thread.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import traceback
from dataclasses import dataclass
from collections.abc import Callable

import torch

from ..engine import AttentionConfig, DeviceError, UserError, compute, tokens_for
from ..engine.base.progress import Cancelled, Watch, watching
from ..engine.model.plan import plan
from .frame import DISPLAY_MAX, Frame, make_frame

SMALL_CELLS = 8 * 64 * 64  # h * T * T
SMALL_PARAMS = 1_000_000  # weights to draw


def is_small(config: AttentionConfig) -> bool:
    """Whether ``config`` computes in about a millisecond (then the GUI thread does it at once).

    Handing a tiny compute to a thread costs more (a GIL hand-over behind the window's
    repaint) than the compute itself.
    """
    if config.model is not None or config.device != "cpu":
        return False
    T, dims = len(tokens_for(config).tokens), config.dims
    h, d, d_k, d_v = dims.heads, dims.d_model, dims.d_k, dims.d_v
    return h * T * T <= SMALL_CELLS and h * d * (2 * d_k + 2 * d_v) <= SMALL_PARAMS


@dataclass(frozen=True)
class Failure:
    """A request that could not be computed, with a message for the person at the window.

    Attributes
    ----------
    request_id : int
    config : AttentionConfig
    message : str
        First line for the user; an unexpected error appends its traceback after it.
    device_error : bool
        The device was at fault (absent, gone, out of memory): the window falls back.
    cancelled : bool
        The person stopped it (``engine.base.progress``): nothing is wrong with the input.
    """

    request_id: int
    config: AttentionConfig
    message: str
    device_error: bool = False
    cancelled: bool = False


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with ``n`` intra-op torch threads, then restore the count.

    The count is process-wide in torch. A tiny compute in the GUI thread runs at one thread:
    at two, on a busy machine, each small op waits for the other core (milliseconds per op).
    """
    before = torch.get_num_threads()
    if before != n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if before != n:
            torch.set_num_threads(before)


def first_maps_first(config: AttentionConfig) -> bool:
    """Whether ``config`` is computed in two frames: the shown layer's maps once the layers before it have run,
    then the rest of the run (``compute(..., first=True)``); a large decoder's, read by attn-gui itself
    (``Capabilities.first_maps``)."""
    return plan(config).can.first_maps


def is_partial(outcome: Frame | Failure) -> bool:
    """Whether ``outcome`` is a decoder's first maps, the rest of its run still to come (``ModelRun.pending``)."""
    return isinstance(outcome, Frame) and outcome.result.model_run is not None \
        and outcome.result.model_run.pending is not None


def run_request(request_id: int, config: AttentionConfig,
                progress: Callable[[int, int], None] | None = None, watch: Watch | None = None, *,
                first: bool = False) -> Frame | Failure:
    """Compute one request: its Frame, or a Failure saying why.

    Only the displayed maps are computed: past DISPLAY_MAX tokens the T x T fields are
    streamed (``compute(config, display_max=DISPLAY_MAX)``). In model mode the model is
    loaded first, reporting ``progress(done, total)`` while a first load converts it. The model's
    run reports its layers to ``watch`` and stops when it is cancelled (a Failure with ``cancelled``; a decoder's
    run stays kept after its last whole layer, and a later request goes on from there).
    ``first``: a large decoder's first maps only (``first_maps_first``, ``compute(..., first=True)``;
    ``is_partial`` says whether more is to come).
    """
    try:
        p = plan(config)  # the model resolved once here: loaded, and asked whether its first maps come first
        if config.model is not None:
            p.source.load(progress)
        with watching(watch or Watch()):
            return make_frame(request_id, compute(config, display_max=DISPLAY_MAX, first=first and p.can.first_maps))
    except Cancelled:
        return Failure(request_id, config, "stopped before the end: the maps show the previous result",
                       cancelled=True)
    except DeviceError as exc:
        return Failure(request_id, config, str(exc), device_error=True)
    except UserError as exc:
        return Failure(request_id, config, str(exc))
    except MemoryError:
        return Failure(request_id, config, "out of memory: choose a shorter text or smaller sizes")
    except Exception as exc:  # noqa: BLE001 - a compute must never take the window down
        detail = "".join(traceback.format_exception(exc))
        return Failure(request_id, config, f"unexpected error: {exc}\n{detail}")


def shares_run(running: AttentionConfig, newer: AttentionConfig) -> bool:
    """Whether ``newer`` reads the model run ``running`` is making (another layer, head or option of the shown
    layer, on the same text): then the run goes on, else a newer request makes it useless and it is cancelled."""
    keep = ("model", "sentence", "ablate", "device", "dtype")
    return running.model is not None and all(getattr(running, f) == getattr(newer, f) for f in keep)


class LatestWins:
    """Holds at most one pending request; ids grow, and only the latest id counts."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: tuple[int, AttentionConfig] | None = None
        self.latest_id = 0

    def submit(self, config: AttentionConfig, pending: bool = True) -> int:
        """A new request's id; it replaces any request not yet taken (kept only if ``pending``)."""
        with self._lock:
            self.latest_id = next(self._ids)
            self._pending = (self.latest_id, config) if pending else None
            return self.latest_id

    def take(self) -> tuple[int, AttentionConfig] | None:
        """The pending request, removed; None when a newer submit already took it."""
        with self._lock:
            job, self._pending = self._pending, None
            return job

    def clear(self) -> None:
        with self._lock:
            self._pending = None

    def is_latest(self, request_id: int) -> bool:
        return request_id == self.latest_id
