"""Which devices this machine has, and turning a device string into a torch.device."""

from __future__ import annotations

import torch

from .errors import DeviceError

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}  # a config's dtype

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


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def _process_limits() -> list[int]:
    """What this process may still allocate under its cgroup's memory limit and its ulimits (Linux).

    MemAvailable is the machine's: a container capped at 7 GB on a 64 GB machine, or a shell with
    ``ulimit -v``, would pass a check against it and then fail mid-allocation.
    """
    import resource

    room = []
    try:
        with open("/proc/self/cgroup") as f:
            groups = [line.strip().split(":", 2) for line in f]
    except OSError:
        groups = []
    for _, controllers, path in (g for g in groups if len(g) == 3):
        if controllers == "":  # cgroup v2
            base = "/sys/fs/cgroup" + path.rstrip("/")
            limit, used = _read_int(base + "/memory.max"), _read_int(base + "/memory.current")
        elif "memory" in controllers.split(","):  # cgroup v1
            base = "/sys/fs/cgroup/memory" + path.rstrip("/")
            limit, used = _read_int(base + "/memory.limit_in_bytes"), _read_int(base + "/memory.usage_in_bytes")
        else:
            continue
        if limit is not None and used is not None and limit < 2**60:
            room.append(max(0, limit - used))
    status = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if value.strip().endswith("kB"):
                    status[key] = int(value.split()[0]) * 1024
    except (OSError, ValueError):
        return room
    for rlimit, field in ((resource.RLIMIT_AS, "VmSize"), (resource.RLIMIT_DATA, "VmData")):
        soft = resource.getrlimit(rlimit)[0]
        if soft != resource.RLIM_INFINITY and field in status:
            room.append(max(0, soft - status[field]))
    return room


def free_bytes(device: torch.device) -> int | None:
    """Memory free for new tensors on ``device``, or None when it cannot be told."""
    try:
        if device.type == "cuda":
            return torch.cuda.mem_get_info(device)[0]
        if device.type == "cpu":
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return min([int(line.split()[1]) * 1024, *_process_limits()])
    except _BROKEN_RUNTIME:  # includes OSError: no /proc/meminfo (macOS, Windows)
        return None
    except ValueError:  # a /proc/meminfo line in a format we do not know
        return None
    return None
