"""The fast path offered: a decoder of a billion parameters or more, opened on the CPU with float32 matmuls, is
offered bfloat16 matmuls in one line, with what each choice costs here and what bfloat16 changes.

The seconds are measured, not guessed: issue 59's table (a Llama-3-8B-shaped Q4_0 file, 8.03 B parameters, layer 16
of a 46-token sentence, a second sentence, 2 cores, load under 1.5): float32 34 s, bfloat16 matmuls 2 s. They are
scaled by the model's parameter count (the matmuls' work grows with it). What bfloat16 changes is the fidelity
table's (``BFLOAT16_ERROR``, docs/benchmarks.md, "bfloat16 matmuls against float32").
"""

from __future__ import annotations

import json

from ..engine import AttentionConfig
from ..engine.config.config import BFLOAT16_ERROR

FAST_PATH_PARAMETERS = 1_000_000_000  # from this many parameters on, float32 on the CPU is offered bfloat16
MEASURED_PARAMETERS = 8_030_261_248  # Llama 3 8B's, the file the seconds below were measured on
FLOAT32_SECONDS = 34.0  # a second sentence at float32 (issue 59's table)
BFLOAT16_SECONDS = 2.0  # the same with bfloat16 matmuls
CHOICES = ("bfloat16", "float32")  # what a person may choose for a model, remembered per model


def offered(config: AttentionConfig, parameters: int | None) -> bool:
    """Whether ``config`` (a model of ``parameters`` numbers, None: not known yet) is one to offer the fast path:
    a decoder of ``FAST_PATH_PARAMETERS`` or more, on the CPU, with float32 matmuls."""
    return (config.model is not None and config.device == "cpu" and config.dtype == "float32"
            and parameters is not None and parameters >= FAST_PATH_PARAMETERS)


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 2 else f"{value:.1f} s"


def costs(parameters: int) -> tuple[float, float]:
    """The seconds a sentence takes here at float32 and with bfloat16 matmuls, for ``parameters`` numbers."""
    scale = parameters / MEASURED_PARAMETERS
    return FLOAT32_SECONDS * scale, BFLOAT16_SECONDS * scale


def offer_text(label: str, parameters: int) -> str:
    """The one line that offers bfloat16 matmuls (rich text: its two links are ``CHOICES``)."""
    slow, fast = costs(parameters)
    return (f"{label} ({parameters / 1e9:.1f} B parameters) runs float32 matmuls: about {_seconds(slow)} a "
            f"sentence here; bfloat16 matmuls: about {_seconds(fast)}, {BFLOAT16_ERROR}. "
            f'<a href="bfloat16">Use bfloat16 matmuls</a> · <a href="float32">keep float32</a>')


def chosen_text(label: str, parameters: int) -> str:
    """The one line that says bfloat16 matmuls were taken as chosen before for this model (with a link back)."""
    slow, fast = costs(parameters)
    return (f"{label}: bfloat16 matmuls, as you chose for it before (about {_seconds(fast)} a sentence; float32 "
            f'about {_seconds(slow)}): {BFLOAT16_ERROR}. <a href="float32">Use float32</a>')


def read_choices(text: str) -> dict[str, str]:
    """The remembered choices, model -> "bfloat16" or "float32", from the settings' JSON (bad entries dropped)."""
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and v in CHOICES and len(k) < 4096}
