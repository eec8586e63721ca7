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
