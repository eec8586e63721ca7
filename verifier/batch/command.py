"""The command: the CLI options as a BatchRequest, then load, list, grade, summarise.

The config is loaded here, in the parent, before the pool forks its workers: that
is what the workers share.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import IO

import attrs

from verifier.batch.cases import Shard, discover_cases, select_cases
from verifier.batch.grader import CaseGrader, config_hash
from verifier.batch.pool import run_pool
from verifier.batch.summary import BatchSummary, Progress, summary_paths, write_summary
from verifier.engine import Limits
from verifier.grading import load_eval
from verifier.output import ensure_writable_dir

EXIT_INTERRUPTED = 130


@attrs.frozen(slots=True)
class BatchRequest:
    """What `verifier batch` was asked to do (the CLI options, parsed)."""

    config: Path
    cases: Path
    out: Path
    jobs: int
    shard: Shard | None = None
    force: bool = False
    limits: Limits = attrs.field(factory=Limits)
    termination_log: Path | None = None
    progress: IO[str] | None = None


def batch_request(
    config: Path,
    cases: Path,
    out: Path,
    jobs: int | None,
    shard: str | None,
    force: bool,
    memory_mb: int,
    no_llm: bool,
    termination_log: Path | None,
) -> BatchRequest:
    """The CLI options as a BatchRequest (a bad --shard is a usage error, exit 2).

    A case's CPU judges run one at a time (LLM judges keep their own pool): the
    workers already fill the CPUs, side by side measured no faster on 2 cores, and
    on a 64-CPU node it would mean thousands of judge processes at once.
    """
    return BatchRequest(
        config=config,
        cases=cases,
        out=out,
        jobs=jobs or available_cpus(),
        shard=Shard.parse(shard) if shard else None,
        force=force,
        limits=Limits(
            parallel=1,
            memory_mb=memory_mb,
            skip_pools=frozenset({"llm"}) if no_llm else frozenset(),
        ),
        termination_log=termination_log,
    )


def run_batch_command(request: BatchRequest) -> int:
    """Grade, print the summary line and where it was written, and report the exit code.

    Case errors do not fail the command (they are rows in the summary): in a
    Kubernetes Job a non-zero exit would re-run the whole shard for one bad case.
    """
    from verifier.grade_command import write_termination_message

    summary = run_batch(request)
    paths = summary_paths(request.out, request.shard)
    print(f"batch: {summary.line()}")
    for path in paths:
        print(f"wrote {path}")
    write_termination_message(request.termination_log, summary.line())
    return EXIT_INTERRUPTED if summary.interrupted else 0


def run_batch(request: BatchRequest) -> BatchSummary:
    """Load once, list the cases, grade them in workers, write the summary files."""
    started = time.monotonic()
    loaded = load_eval(request.config)
    stream = request.progress if request.progress is not None else sys.stderr
    for warning in loaded.config.warnings:
        print(f"warning: {warning}", file=stream)
    digest = config_hash(request.config, request.limits)
    ensure_writable_dir(request.out)
    cases = select_cases(discover_cases(request.cases, request.out), request.shard)
    worker = CaseGrader(loaded, request.limits, request.out, digest, request.force)
    progress = Progress(len(cases), stream)
    outcomes, interrupted = run_pool(cases, worker, request.jobs, progress.update)
    progress.close()
    summary = BatchSummary(
        config=request.config,
        config_hash=digest,
        cases_dir=request.cases,
        shard=request.shard,
        outcomes=tuple(outcomes[case.name] for case in cases if case.name in outcomes),
        elapsed_s=time.monotonic() - started,
        interrupted=interrupted,
    )
    write_summary(request.out, summary)
    return summary


def available_cpus() -> int:
    """The default --jobs: CPUs this process may use, capped by a cgroup CPU limit.

    In a pod the affinity mask shows the node's CPUs, not the container's limit;
    one worker per node CPU under a 2-CPU limit would only thrash.
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
    except (OSError, ValueError, IndexError):
        pass
    try:
        quota = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        period = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None
