"""The Makefile's PyTorch choice, from make's dry run (``make -n``): nothing is installed or fetched."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def dry_run(tmp_path, *args, gpu: bool) -> str:
    """make's dry run of the setup with a PATH holding only sh (and nvidia-smi when ``gpu``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(shutil.which("sh"), bin_dir / "sh")
    if gpu:
        (bin_dir / "nvidia-smi").write_text("#!/bin/sh\n")
        (bin_dir / "nvidia-smi").chmod(0o755)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    proc = subprocess.run([MAKE, "-n", "-B", "-C", str(REPO), ".venv/.installed", *args], capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_no_nvidia_gpu_takes_the_cpu_index_and_says_so(tmp_path):
    out = dry_run(tmp_path, gpu=False)
    assert f'pip install -q "torch" --index-url "{CPU_INDEX}"' in out
    assert "no nvidia-smi on PATH" in out and "cannot be reached: trying the CPU build torch==2.13.0+cpu" in out


def torch_installs(out: str) -> list[str]:
    """The pip commands of the dry run that install torch."""
    return ["pip " + line.split(" pip ", 1)[1].strip() for line in out.splitlines() if 'pip install -q "torch' in line]


def test_an_nvidia_gpu_keeps_the_default_index(tmp_path):
    out = dry_run(tmp_path, gpu=True)
    assert torch_installs(out) == ['pip install -q "torch"'] and CPU_INDEX not in out


@pytest.mark.parametrize("args, line", [
    (("TORCH=torch==2.13.0",), 'pip install -q "torch==2.13.0"'),
    ((f"TORCH_INDEX={CPU_INDEX}",), f'pip install -q "torch" --index-url "{CPU_INDEX}"'),
])
def test_a_caller_s_choice_is_kept_as_given(tmp_path, args, line):
    out = dry_run(tmp_path, *args, gpu=False)
    assert torch_installs(out) == [line]
    assert "no nvidia-smi" not in out


def test_the_setup_echoes_no_comment_lines_and_names_the_fallbacks_size(tmp_path):
    # make echoes a tab-indented comment inside a recipe as a command; the first `make run` printed two
    out = dry_run(tmp_path, gpu=False)
    assert not [line for line in out.splitlines() if line.lstrip().startswith("#") or "  # " in line]
    fallback = next(line for line in out.splitlines() if "that is the CUDA build" in line)
    assert "about 6 GB" in fallback  # the .venv measured with the CUDA build (issue 33), against 1.6 GB


@pytest.mark.parametrize("mirror_has_cpu", [True, False])
def test_without_a_gpu_or_the_cpu_index_the_cpu_build_comes_before_the_cuda_one(tmp_path, mirror_has_cpu):
    # issue 62: where PyTorch's CPU index was unreachable, `make run` installed the 6.6 GB CUDA build at once; the
    # setup is run for real here with a python that records each pip call (the CPU index fails, as offline)
    bin_dir, venv = tmp_path / "bin", tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    bin_dir.mkdir()
    for tool in ("sh", "touch"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    calls = tmp_path / "calls"
    refuse = "*download.pytorch.org*" + ("" if mirror_has_cpu else "|*+cpu*")
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho "$*" >> {calls}\ncase "$*" in {refuse}) exit 1;; esac\n')
    python.chmod(0o755)
    proc = subprocess.run([MAKE, "-B", "-C", str(REPO), f"VENV={venv}", f"{venv}/.torch"], capture_output=True,
                          text=True, env={"PATH": str(bin_dir), "HOME": str(tmp_path)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    installs = [line for line in calls.read_text().splitlines() if "torch" in line]
    assert CPU_INDEX in installs[0] and "torch==2.13.0+cpu" in installs[1]  # the CPU index, then a mirror's CPU build
    assert len(installs) == (2 if mirror_has_cpu else 3)  # the CUDA build only where neither has it
    assert ("that is the CUDA build" in proc.stdout) != mirror_has_cpu


def test_make_test_installs_exactly_the_lock_and_make_run_the_ranges(tmp_path):
    """``make test`` (and so CI) installs the lock's pinned, hashed versions and nothing resolved on the day;
    ``make run`` keeps pyproject.toml's ranges, as a user installs them (issue 55)."""
    env = {"PATH": os.path.dirname(shutil.which("sh")), "HOME": str(tmp_path)}
    runs = {target: subprocess.run([MAKE, "-n", "-B", "-C", str(REPO), target, "TORCH=torch==2.13.0"],
                                   capture_output=True, text=True, env=env, timeout=60).stdout
            for target in ("test", "run")}
    installs = [line for line in runs["test"].splitlines() if "pip install" in line]
    assert installs == [".venv/bin/python -m pip install -q --upgrade pip",
                        '.venv/bin/python -m pip install -q "torch==2.13.0" ',
                        ".venv/bin/python -m pip install -q --no-deps --require-hashes -r .ci/requirements.lock",
                        ".venv/bin/python -m pip install -q --no-deps -e ."]
    assert "requirements.lock" not in runs["run"] and 'pip install -q -e ".[test]"' in runs["run"]
