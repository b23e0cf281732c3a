"""A long sentence is refused before its T x T tensors exist (issue 38, item 2): the export's own size, and
the compute's memory under a process limit (a container's cap, ``ulimit``), each in one line and exit 2.

The peers: the kernel's own accounting (``/proc/self/status`` VmData against ``RLIMIT_DATA``, what an
allocation is refused by), and torch's full-size computation of the saturation's span.
"""

import os
import resource
import subprocess
import sys

import pytest
import torch

from attn_gui.cli import main
from attn_gui.engine.analysis.scaling import finite_span, saturation

WORDS = " ".join(f"w{i % 500}" for i in range(10_000))  # 10,000 tokens of the random mode's tokenizer


def test_a_long_export_is_refused_before_the_compute(tmp_path, capsys, monkeypatch):
    import attn_gui.engine

    def no_compute(*args, **kwargs):
        raise AssertionError("computed the T x T tensors before refusing the export")

    monkeypatch.setattr(attn_gui.engine, "compute", no_compute)
    out = tmp_path / "out"
    assert main(["export", "--sentence", WORDS, "--format", "npy", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "this export would write about 1.1 GiB" in err and "attn-gui export --yes" in err
    assert not out.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA and /proc: Linux")
def test_free_memory_counts_the_process_limit():
    code = ("import resource, torch; from attn_gui.engine.base.devices import free_bytes\n"
            "used = int(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmData'))) * 1024\n"
            "resource.setrlimit(resource.RLIMIT_DATA, (used + 2**29, resource.getrlimit(resource.RLIMIT_DATA)[1]))\n"
            "print(free_bytes(torch.device('cpu')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert 0 < int(proc.stdout) <= 2**29  # at most the 512 MiB the limit leaves, not the machine's free memory


def _cap(limit: int):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_DATA, (limit, resource.getrlimit(resource.RLIMIT_DATA)[1]))
    return set_limit


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA: Linux")
def test_sixteen_thousand_tokens_under_a_memory_cap_are_one_line(tmp_path):
    words = " ".join(f"w{i % 500}" for i in range(16_000))
    out = tmp_path / "out"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    # --yes: past the export's own size check, to the compute's (about 4 GiB of scores, 3 GiB allowed)
    proc = subprocess.run([sys.executable, "-m", "attn_gui", "export", "--yes", "--format", "npy", "--sentence",
                           words, "--out", str(out)], capture_output=True, text=True, timeout=300, env=env,
                          preexec_fn=_cap(3 * 2**30))
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "T = 16,000" in proc.stderr and "free" in proc.stderr
    assert not out.exists()


def test_the_span_read_in_blocks_equals_torchs_over_the_whole_tensor():
    g = torch.Generator().manual_seed(0)
    scaled = torch.randn(3, 700, 900, generator=g) * 40
    scaled[0, 5, 7], scaled[1, 600, 2], scaled[2, 0, 0] = float("inf"), float("-inf"), float("nan")
    scaled[2, 699, 899] = -1234.5  # the largest finite |value|, in the last block
    whole = scaled[torch.isfinite(scaled)].abs().max()  # torch, the full-size copy the blocks avoid
    assert finite_span(scaled) == float(whole) == 1234.5
    assert finite_span(torch.full((2, 3), float("nan"))) == 0.0
    weights = torch.softmax(scaled.nan_to_num(0, 0, 0), -1)
    causal = torch.ones(700, 900, dtype=torch.bool).tril()
    sat = saturation(weights, scaled, causal)
    counted = causal.sum(-1).expand(3, 700) > 1  # each row's visible keys, counted by torch
    expected = ((weights.amax(-1) >= 0.99) & counted).sum() / counted.sum()
    assert sat.rows == int(counted.sum()) and sat.one_hot == pytest.approx(float(expected))
