"""What this process may use of the machine: its CPU count, cgroup limits included; and
when it started."""

from __future__ import annotations

import functools
import math
import os
import time
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


# A process's start older than this is a clock that does not match /proc's (a time
# namespace offsets CLOCK_BOOTTIME, not the start), not a start: no import takes it.
_PLAUSIBLE_AGE_S = 300.0


def process_started() -> float:
    """The time.monotonic() instant this process started (its fork, from
    /proc/self/stat), so that a deadline counts the interpreter's start and the imports,
    which a loaded node makes take seconds; now when /proc cannot tell."""
    now = time.monotonic()
    try:
        stat = Path("/proc/self/stat").read_text()
        # Field 22, after the command name in parentheses (which may hold anything).
        ticks = int(stat[stat.rindex(")") + 2 :].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return now
    return now - age if 0.0 <= age <= _PLAUSIBLE_AGE_S else now


def _cgroup_cpu_quota() -> float | None:
    try:
        fields = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        quota = int(fields[0]) / int(fields[1]) if fields and fields[0] != "max" else None
    except (OSError, ValueError, IndexError, ZeroDivisionError):
        pass
    else:
        return quota
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

    cgroup v2's `memory.max`, or v1's `memory.limit_in_bytes` (hybrid hosts, such as this
    project's, have both), of every dir cgroup_dirs finds: the lowest limit found is the
    one the kernel enforces first.
    """
    found = [
        limit
        for directory, unified in cgroup_dirs("memory")
        if (limit := cgroup_number(directory / _memory_file(unified, "limit"))) is not None
        and limit > 0
    ]
    return min(found) if found else None


def cgroup_memory_headroom() -> int | None:
    """How much more memory this process's cgroup may use: its limit less its usage, in
    the nearest dir that has both; None when none has a limit."""
    for directory, unified in cgroup_dirs("memory"):
        limit = cgroup_number(directory / _memory_file(unified, "limit"))
        usage = cgroup_number(directory / _memory_file(unified, "usage"))
        if limit is not None and usage is not None:
            return limit - usage
    return None


def cgroup_pids_max() -> int | None:
    """The lowest pids.max of this process's cgroup and those above it (v2 or v1), None
    when unlimited or unreadable."""
    found = [
        limit
        for directory, _ in cgroup_dirs("pids")
        if (limit := cgroup_number(directory / "pids.max")) is not None
    ]
    return min(found) if found else None


def cgroup_dirs(controller: str) -> list[tuple[Path, bool]]:
    """Where `controller`'s files of this process's cgroup may be, nearest first, each
    with whether it is in the unified (v2) hierarchy: its cgroup's dir and every dir
    above it, in v2's hierarchy and in the controller's v1 one, then each hierarchy's
    root. Inside a container the cgroup fs shows the container's own cgroup at its root
    (a cgroup namespace, or the engine's bind mount); outside one the path in
    /proc/self/cgroup leads to it: both are looked at."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    found: list[tuple[Path, bool]] = []
    for line in lines:
        _, controllers, path = line.split(":", 2) if line.count(":") >= 2 else ("", "", "")
        if controllers == "" and path.startswith("/"):
            base, unified = CGROUP_ROOT, True
        elif controller in controllers.split(",") and path.startswith("/"):
            base, unified = CGROUP_ROOT / controller, False
        else:
            continue
        directory = base / path.lstrip("/")
        while directory != base and directory.is_relative_to(base):
            found.append((directory, unified))
            directory = directory.parent
    roots = [(CGROUP_ROOT, True), (CGROUP_ROOT / controller, False)]
    return list(dict.fromkeys([*found, *roots]))


def cgroup_number(path: Path) -> int | None:
    """The number in a cgroup file; None when it is unreadable, not a number, or no
    limit at all (v2's `max`, v1's number near 2**63)."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text.isdigit():
        return None
    number = int(text)
    return number if number < _UNLIMITED else None


def _memory_file(unified: bool, which: str) -> str:
    """The name of the memory controller's limit or usage file, in v2 or v1."""
    names = {
        "limit": ("memory.max", "memory.limit_in_bytes"),
        "usage": ("memory.current", "memory.usage_in_bytes"),
    }
    return names[which][0 if unified else 1]
