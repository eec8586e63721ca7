"""Figures for `verifier batch`: cases per second, beside one `verifier grade` per case.

Generates N cases (default 1,000: passing, failing and short reports) for an
eval.yaml with three inline judges, times `verifier batch --jobs J` over all of
them (the whole command: start-up, loading, forking, summary), then times a
sample of per-case `verifier grade` subprocess runs and extrapolates them to N.
Issue 6's target: at least 100 cases/s with --jobs 2 on a 2-core machine.

    python bench/batch.py [--cases 1000] [--jobs 2] [--sample 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_CASES_PER_S = 100.0

EVAL_YAML = """\
name: bench-batch-three-inline
outputs:
  - path: report.md
judges:
  - name: has_report
    check: |
      return "report.md" in outputs["files"]
  - name: mentions_fix
    check: |
      return "fixed" in outputs["files"].get("report.md", "").lower()
  - name: length_score
    score_range: [1, 5]
    check: |
      words = len(outputs["files"].get("report.md", "").split())
      return min(5, max(1, words // 20 + 1))
"""

REPORTS = (
    "The bug is fixed. " * 30,
    "Could not reproduce the crash. " * 10,
    "fixed",
)


def make_cases(root: Path, count: int) -> Path:
    cases = root / "cases"
    for index in range(count):
        case = cases / f"case-{index:06d}"
        case.mkdir(parents=True)
        (case / "report.md").write_text(REPORTS[index % len(REPORTS)])
    return cases


def run(command: list[str]) -> float:
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if completed.returncode != 0:
        failed = f"{' '.join(command)} failed ({completed.returncode})"
        raise SystemExit(f"{failed}:\n{completed.stderr}")
    return elapsed


def time_batch(verifier: str, config: Path, cases: Path, out: Path, jobs: int) -> float:
    shutil.rmtree(out, ignore_errors=True)
    command = [verifier, "batch", "--config", str(config), "--cases", str(cases)]
    elapsed = run([*command, "--out", str(out), "--jobs", str(jobs), "--force"])
    summary = json.loads((out / "summary.json").read_text())
    if summary["graded"] != summary["count"]:
        raise SystemExit(f"batch graded {summary['graded']} of {summary['count']} cases")
    return elapsed


def time_grade_sample(verifier: str, config: Path, cases: Path, out: Path, sample: int) -> float:
    """Median seconds of one `verifier grade` subprocess over the first `sample` cases."""
    names = sorted(path.name for path in cases.iterdir())[:sample]
    command = [verifier, "grade", "--config", str(config)]
    times = [
        run([*command, "--case", str(cases / name), "--out", str(out / name)]) for name in names
    ]
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sample", type=int, default=50, help="per-case grade runs timed")
    parser.add_argument("--repeat", type=int, default=3, help="batch runs; the median is shown")
    options = parser.parse_args()
    verifier = str(Path(sys.executable).with_name("verifier"))
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as scratch:
        root = Path(scratch)
        config = root / "eval.yaml"
        config.write_text(EVAL_YAML)
        cases = make_cases(root, options.cases)
        batch_times = [
            time_batch(verifier, config, cases, root / "out-batch", options.jobs)
            for _ in range(options.repeat)
        ]
        per_case = time_grade_sample(verifier, config, cases, root / "out-grade", options.sample)
    batch_s = statistics.median(batch_times)
    batch_rate = options.cases / batch_s
    grade_total = per_case * options.cases
    verdict = "meets" if batch_rate >= TARGET_CASES_PER_S else "MISSES"
    print(f"{options.cases} cases, 3 inline judges each, {options.jobs} jobs")
    print(f"{'':34}{'total s':>10}{'cases/s':>10}{'ms/case':>10}")
    rows = (
        (f"verifier batch --jobs {options.jobs}", batch_s, batch_rate),
        (f"verifier grade x {options.cases} (est.)", grade_total, options.cases / grade_total),
    )
    for label, total, rate in rows:
        print(f"{label:34}{total:10.2f}{rate:10.1f}{1000 * total / options.cases:10.2f}")
    print(
        f"batch is {grade_total / batch_s:.1f}x faster than one grade per case "
        f"(grade: median of {options.sample} runs x {options.cases}); "
        f"batch runs: {', '.join(f'{t:.2f}' for t in batch_times)} s"
    )
    print(f"target >= {TARGET_CASES_PER_S:.0f} cases/s with --jobs 2: {verdict} ({batch_rate:.1f})")


if __name__ == "__main__":
    main()
