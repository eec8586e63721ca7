"""Figures for `verifier batch`: cases per second, beside one `verifier grade` per case.

Generates N cases (default 1,000: passing, failing and short reports) for an
eval.yaml with three inline judges, times `verifier batch --jobs J` over all of
them (the whole command: start-up, loading, forking, summary), then times a
sample of per-case `verifier grade` subprocess runs and extrapolates them to N.
Target: at least 150 cases/s with --jobs 2 on a 2-core machine (issue 6 asked 100,
issue 13 keeps the throughput it reached).

    python bench/batch.py [--cases 1000] [--jobs 2] [--sample 50] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from common import REPORT, THREE_INLINE_EVAL_YAML, installed_verifier

TARGET_CASES_PER_S = 150.0


REPORTS = (
    "The bug is fixed. " * 30,
    "Could not reproduce the crash. " * 10,
    "fixed",
)


def make_cases(root: Path, count: int) -> Path:
    cases = root / "cases"
    for index in range(count):
        path = cases / f"case-{index:06d}" / REPORT
        path.parent.mkdir(parents=True)
        path.write_text(REPORTS[index % len(REPORTS)])
    return cases


def run(command: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (the command and every process it waited for)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    assert process.stderr is not None
    errors = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{errors}")
    return elapsed, usage.ru_utime + usage.ru_stime


def time_batch(
    verifier: str, config: Path, cases: Path, out: Path, jobs: int
) -> tuple[float, float]:
    """One batch run into a new out dir. (Not a deleted and recreated one: on ext4
    without a journal, creating files right after thousands were deleted makes the
    kernel skip the recently freed inodes one by one, which would time the disk.)"""
    command = [verifier, "batch", "--config", str(config), "--cases", str(cases)]
    timing = run([*command, "--out", str(out), "--jobs", str(jobs), "--force"])
    summary = json.loads((out / ".batch" / "summary.json").read_text())
    if summary["graded"] != summary["count"]:
        raise SystemExit(f"batch graded {summary['graded']} of {summary['count']} cases")
    return timing


def time_grade_sample(verifier: str, config: Path, cases: Path, out: Path, sample: int) -> float:
    """Median seconds of one `verifier grade` subprocess over the first `sample` cases."""
    names = sorted(path.name for path in cases.iterdir())[:sample]
    command = [verifier, "grade", "--config", str(config)]
    times = [
        run([*command, "--case", str(cases / name), "--out", str(out / name)])[0] for name in names
    ]
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sample", type=int, default=50, help="per-case grade runs timed")
    parser.add_argument("--repeat", type=int, default=5, help="batch runs; the median is shown")
    options = parser.parse_args()
    verifier = installed_verifier()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as scratch:
        root = Path(scratch)
        config = root / "eval.yaml"
        config.write_text(THREE_INLINE_EVAL_YAML)
        cases = make_cases(root, options.cases)
        runs = [
            time_batch(verifier, config, cases, root / f"out-batch-{run}", options.jobs)
            for run in range(options.repeat)
        ]
        per_case = time_grade_sample(verifier, config, cases, root / "out-grade", options.sample)
    report(options, runs, per_case, (load_before, os.getloadavg()[0]))


def report(
    options: argparse.Namespace,
    runs: list[tuple[float, float]],
    per_case: float,
    load: tuple[float, float],
) -> None:
    n = options.cases
    batch_s = statistics.median(wall for wall, _ in runs)
    cpu_ms = 1000 * statistics.median(cpu for _, cpu in runs) / n
    batch_rate = n / batch_s
    grade_total = per_case * n
    cores = len(os.sched_getaffinity(0))
    print(f"{n} cases, 3 inline judges each, --jobs {options.jobs}, {cores} CPUs")
    print(f"{'':34}{'total s':>10}{'cases/s':>10}{'ms/case':>10}")
    rows = (
        (f"verifier batch --jobs {options.jobs}", batch_s, batch_rate),
        (f"verifier grade x {n} (est.)", grade_total, n / grade_total),
    )
    for label, total, rate in rows:
        print(f"{label:34}{total:10.2f}{rate:10.1f}{1000 * total / n:10.2f}")
    print(
        f"batch: {grade_total / batch_s:.1f}x the throughput of one `verifier grade` per case "
        f"(grade: median of {options.sample} runs, times {n})"
    )
    print(
        f"batch CPU: {cpu_ms:.2f} ms/case (parent, workers, judge processes); "
        f"batch runs: {', '.join(f'{wall:.2f}' for wall, _ in runs)} s; "
        f"load average {load[0]:.1f} before, {load[1]:.1f} after (other load slows it)"
    )
    best_rate = n / min(wall for wall, _ in runs)
    verdict = "meets" if batch_rate >= TARGET_CASES_PER_S else "MISSES"
    print(
        f"target >= {TARGET_CASES_PER_S:.0f} cases/s with --jobs 2: {verdict} "
        f"(median {batch_rate:.1f}, best run {best_rate:.1f})"
    )


if __name__ == "__main__":
    main()
