"""Which devices this machine has, and turning a device string into a torch.device."""

from __future__ import annotations

import torch

from .errors import DeviceError

# What torch raises when a driver or runtime is broken or half-installed: a RuntimeError
# ("CUDA driver initialization failed", "Found no NVIDIA driver"), an AssertionError
# ("Torch not compiled with CUDA enabled"), or an OSError from a missing shared library.
_BROKEN_RUNTIME = (RuntimeError, AssertionError, OSError)


def available_devices() -> list[tuple[str, str]]:
    """(device string, human label) for every device torch can use here, CPU first."""
    found = [("cpu", "CPU")]
    try:
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                found.append((f"cuda:{i}", f"CUDA {i}: {torch.cuda.get_device_name(i)}"))
    except _BROKEN_RUNTIME:  # a broken driver must not stop the app from listing the CPU
        found = found[:1]
    try:
        if torch.backends.mps.is_available():
            found.append(("mps", "Apple MPS"))
    except _BROKEN_RUNTIME:  # as above, for Metal
        pass
    return found


def resolve_device(name: str) -> torch.device:
    """A torch.device for ``name``, or ``DeviceError`` saying why it cannot be used."""
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError(f"{name}: CUDA is not available on this machine")
        index = int(name.split(":")[1]) if ":" in name else 0
        if index >= torch.cuda.device_count():
            raise DeviceError(f"{name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        return torch.device("cuda", index)
    if name == "mps":
        if not torch.backends.mps.is_available():
            raise DeviceError("mps: Apple MPS is not available on this machine")
        return torch.device("mps")
    raise DeviceError(f"unknown device {name!r}")


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels so timings measure the work, not the launch."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def free_bytes(device: torch.device) -> int | None:
    """Memory free for new tensors on ``device``, or None when it cannot be told."""
    try:
        if device.type == "cuda":
            return torch.cuda.mem_get_info(device)[0]
        if device.type == "cpu":
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
    except _BROKEN_RUNTIME:  # includes OSError: no /proc/meminfo (macOS, Windows)
        return None
    except ValueError:  # a /proc/meminfo line in a format we do not know
        return None
    return None
