"""What this process may use of the machine: its CPU count, cgroup limits included."""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path


@functools.cache
def available_cpus() -> int:
    """CPUs this process may use, capped by a cgroup CPU limit.

    In a pod the affinity mask shows the node's CPUs, not the container's limit;
    one worker (or one judge at a time) per node CPU under a 2-CPU limit would
    only thrash. Read once per process: the limit does not change under it.
    """
    count = len(os.sched_getaffinity(0)) or 1
    quota = _cgroup_cpu_quota()
    return max(1, min(count, math.ceil(quota))) if quota else count


def _cgroup_cpu_quota() -> float | None:
    try:
        fields = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if fields and fields[0] != "max":
            return int(fields[0]) / int(fields[1])
        return None
    except (OSError, ValueError, IndexError, ZeroDivisionError):
        pass
    try:
        quota = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        period = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


CGROUP_ROOT = Path("/sys/fs/cgroup")
_UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a number near 2**63


@functools.cache
def container_memory_bytes() -> int | None:
    """The memory limit of this process's container (its cgroup), in bytes; None without one.

    cgroup v2: `memory.max` of this process's cgroup and of every cgroup above it (the
    lowest applies); cgroup v1 (and hybrid hosts, such as this project's): the same
    with `memory/memory.limit_in_bytes`. Inside a container the cgroup fs shows the
    container's own cgroup at its root (a cgroup namespace, or the engine's bind
    mount), outside one the path in /proc/self/cgroup leads to it: both are read, and
    the lowest limit found is the one the kernel enforces first.
    """
    found = [
        limit
        for directory, name in _cgroup_memory_files()
        if (limit := _limit_in(directory / name)) is not None
    ]
    return min(found) if found else None


def _cgroup_memory_files() -> list[tuple[Path, str]]:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    files = [(CGROUP_ROOT, "memory.max"), (CGROUP_ROOT / "memory", "memory.limit_in_bytes")]
    for line in lines:
        _, controllers, path = line.split(":", 2) if line.count(":") >= 2 else ("", "", "")
        if controllers == "" and path.startswith("/"):
            base, name = CGROUP_ROOT, "memory.max"
        elif "memory" in controllers.split(",") and path.startswith("/"):
            base, name = CGROUP_ROOT / "memory", "memory.limit_in_bytes"
        else:
            continue
        directory = base / path.lstrip("/")
        while directory != base and directory.is_relative_to(base):
            files.append((directory, name))
            directory = directory.parent
    return files


def _limit_in(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return None
    try:
        limit = int(text)
    except ValueError:
        return None
    return limit if 0 < limit < _UNLIMITED else None
