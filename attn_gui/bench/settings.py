"""What the benchmark runs: its settings, its attention config, and whether Qt may be used."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from ..engine import AttentionConfig

TINY_ENV = "ATTN_GUI_BENCH_TINY"

HEADS = 8
HEAD_SIZE = 64
D_MODEL = HEADS * HEAD_SIZE

FULL_SIZES = (5, 64, 256, 512, 1024, 2048)
QUICK_SIZES = (5, 64, 512)
CUDA_EXTRA_SIZES = (4096, 8192)


@dataclass(frozen=True)
class BenchSettings:
    """What to measure and how often.

    Attributes
    ----------
    device : str
        Device of the engine measurements ("cpu", "cuda", "cuda:N", "mps").
    sizes : tuple of int
        Sequence lengths T of the engine-overhead measurement.
    min_repeats, max_repeats : int
        Timed rounds per measurement, after one warm-up round.
    budget_s : float
        Past ``min_repeats``, keep timing rounds until this many seconds have gone.
    display_T : int
        Sequence length of the display-reduction measurement.
    memory_sizes : tuple of int
        Sequence lengths of the peak-memory subprocesses (computed as the window does).
    memory_full_T : int
        Also one subprocess computing this length in full (0: none).
    startup_repeats, startup_warmup : int
        Timed and untimed runs of each start-up subprocess.
    engine_only : bool
        Skip everything that needs Qt.
    mode : str
        "full", "quick" or "tiny", recorded in the report.
    only : tuple of str
        The sections to run (``attn-gui bench --only``); empty: every section but "heavy".
    heavy : bool
        Also run the "heavy" section (``attn-gui bench --heavy``: 8 B files, minutes and 26 GB of disk).
    compare : str
        ``--compare REV``: the window part is timed against REV (a commit, or a folder holding
        ``attn_gui``) in the same run, in turns; "" for none.
    """

    device: str = "cpu"
    sizes: tuple[int, ...] = FULL_SIZES
    min_repeats: int = 15
    max_repeats: int = 300
    budget_s: float = 12.0
    display_T: int = 2048
    memory_sizes: tuple[int, ...] = (64, 2048, 4096)
    memory_full_T: int = 2048
    startup_repeats: int = 3
    startup_warmup: int = 1
    engine_only: bool = False
    mode: str = "full"
    only: tuple[str, ...] = ()
    heavy: bool = False
    compare: str = ""

    def wants(self, section: str) -> bool:
        """Whether ``section`` runs: every one unless ``--only`` named some; "heavy" only with ``--heavy`` or named."""
        if section == "heavy":
            return self.heavy or section in self.only
        return not self.only or section in self.only

    @classmethod
    def for_mode(cls, quick: bool = False, device: str = "cpu", engine_only: bool = False,
                 tiny: bool = False) -> BenchSettings:
        """The settings of ``attn-gui bench`` (full), ``--quick``, or the tests' tiny run.

        On CUDA the engine sizes also include 4096 and 8192.
        """
        if tiny:
            return cls(device=device, sizes=(5, 16), min_repeats=2, max_repeats=2, budget_s=0.0,
                       display_T=32, memory_sizes=(8, 32), memory_full_T=32, startup_repeats=1, startup_warmup=0,
                       engine_only=engine_only, mode="tiny")
        extra = CUDA_EXTRA_SIZES if device.startswith("cuda") else ()
        if quick:
            return cls(device=device, sizes=QUICK_SIZES + extra, min_repeats=5, max_repeats=50,
                       budget_s=1.0, engine_only=engine_only, mode="quick")
        return cls(device=device, sizes=FULL_SIZES + extra, engine_only=engine_only, mode="full")


def qt_skip_reason(settings: BenchSettings) -> str | None:
    """Why the parts that need Qt are skipped, or None when they run."""
    if settings.engine_only:
        return "--engine-only"
    if importlib.util.find_spec("PySide6") is None:
        return "PySide6 is not installed"
    return None


def sentence(T: int) -> str:
    """A sentence of T distinct words: "w0 w1 ... w{T-1}"."""
    return " ".join(f"w{i}" for i in range(T))


def engine_config(T: int, device: str = "cpu") -> AttentionConfig:
    """The benchmark's config: T distinct words, 8 heads of size 64, d_model = 512."""
    return AttentionConfig(sentence=sentence(T), d_model=D_MODEL, d_k=HEAD_SIZE, d_v=HEAD_SIZE,
                           heads=HEADS, init="scaled_normal", device=device)
