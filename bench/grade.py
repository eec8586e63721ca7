"""Figures for `verifier grade` on a case with three inline judges, beside the reference.

Prints the median wall time and peak memory of `verifier grade` and, measured in
the same run and interleaved with it (so machine noise hits both alike), of the
reference's reward bridge (`python -m agent_eval.harbor.reward`) on the same
eval.yaml and case, with yardsticks: a bare interpreter start, an import of the CLI
framework, and the floor the stack sets (importing attrs and PyYAML; importing attrs
and building as many attrs classes as a grade of these judges builds, counted in the
same run). The ratio to the reference is the figure that counts (targets: at most
0.6x its wall time; peak memory below 20 MiB). Without REF_DIR (the reference's
source tree) the reference is not run and no ratio is printed.

    REF_DIR=/path/to/agent-eval-harness python bench/grade.py [--runs 21] [--baseline main]

`--baseline REV` also grades with a regular install of that git revision, in the same
interleaved runs: a change's figure before and after it, side by side.

It grades with a regular install of this checkout (see bench/common.py).
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

from common import (
    BENCH_VENV,
    REPORT,
    THREE_INLINE_EVAL_YAML,
    installed_revision,
    installed_verifier,
    reference_python,
    reference_tree,
)

TARGET_RATIO = 0.6
TARGET_PEAK_MIB = 20


def median_wall(timings: list[tuple[float, float]]) -> float:
    """The median wall seconds of (wall, peak) samples."""
    return statistics.median(wall for wall, _ in timings)


def measure(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one run of command.

    The peak comes from GNU time: a child forked from this (larger) Python process
    would carry this process's RSS into its own high-water mark until it execs.
    """
    started = time.perf_counter()
    completed = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        env=env,
    )
    elapsed = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {completed.stderr}")
    return elapsed, int(completed.stderr.split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--baseline", help="a git revision whose grade is measured beside")
    options = parser.parse_args()
    verifier = installed_verifier()
    reference = reference_tree()
    python = str(BENCH_VENV / "bin" / "python")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "eval.yaml").write_text(THREE_INLINE_EVAL_YAML)
        report = root / "case" / REPORT
        report.parent.mkdir(parents=True)
        report.write_text("The bug is fixed. " * 30)
        grade_args = ["grade", "--config", str(root / "eval.yaml"), "--case", str(root / "case")]
        records = count_records(python, grade_args, root / "out-count")
        commands: dict[str, tuple[list[str], dict[str, str] | None]] = {
            "verifier grade": ([verifier, *grade_args, "--out", str(root / "out")], None),
            "python -c pass": ([python, "-c", "pass"], None),
            "python -c 'import argparse'": ([python, "-c", "import argparse"], None),
            STACK_ROW: ([python, "-c", STACK], None),
            RECORDS_ROW.format(records): ([python, "-c", BUILD_RECORDS, str(records)], None),
        }
        if options.baseline:
            baseline, commit = installed_revision(options.baseline)
            commands[f"verifier grade at {commit[:12]}"] = (
                [baseline, *grade_args, "--out", str(root / "out-baseline")],
                None,
            )
        if reference is not None:
            environment = {**os.environ, "PYTHONPATH": str(reference)}
            commands["reference reward bridge"] = (
                [
                    reference_python(),
                    "-m",
                    "agent_eval.harbor.reward",
                    "--config",
                    str(root / "eval.yaml"),
                    "--case-dir",
                    str(root / "case"),
                    "--out-dir",
                    str(root / "out-reference"),
                ],
                environment,
            )
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for command, env in commands.values():
            measure(command, env)  # warm the page cache and byte code
        names = list(commands)
        for round_number in range(options.runs):
            # The order rotates each round: the first of a round runs slower here.
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                command, env = commands[name]
                samples[name].append(measure(command, env))
        durable_ms, plain_ms = time_output_writes(python, root / "writes")
        ours = json.loads((root / "out" / "reward.json").read_text())
        theirs = (
            json.loads((root / "out-reference" / "reward.json").read_text()) if reference else None
        )
    report_figures(options.runs, records, samples, ours, theirs)
    grade_ms = 1000 * median_wall(samples["verifier grade"])
    print(
        f"  durable outputs (fsync of the four files and the dir): {durable_ms:.2f} ms per "
        f"grade against {plain_ms:.2f} ms without, {durable_ms - plain_ms:.2f} ms "
        f"({(durable_ms - plain_ms) / grade_ms:.1%} of a grade) on this disk"
    )


STACK = "import attrs, yaml"
STACK_ROW = f"python -c '{STACK}'"
RECORDS_ROW = "python -c 'import attrs' + {} records"
# As many attrs classes as the grade builds, each with three fields like a small record.
BUILD_RECORDS = """
import sys, attrs
fields = {"__annotations__": {"a": "int", "b": "str", "c": "float"}}
for number in range(int(sys.argv[1])):
    attrs.frozen(type(f"Record{number}", (), dict(fields)))
"""
# The attrs classes a grade builds: those at the top level of the verifier modules it imported.
COUNT_RECORDS = """
import sys, attrs
from verifier.cli.parser import run
run(["grade", *sys.argv[1:]])
count = sum(1 for name, module in list(sys.modules.items()) if name.startswith("verifier")
            for value in vars(module).values()
            if isinstance(value, type) and attrs.has(value) and value.__module__ == name)
print(count, file=sys.stderr)
"""


def count_records(python: str, grade_args: list[str], out: Path) -> int:
    """How many attrs classes `verifier grade` builds on the bench's case."""
    completed = subprocess.run(
        [python, "-c", COUNT_RECORDS, *grade_args[1:], "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(completed.stderr.split()[-1])


WRITES = """
import statistics, sys, time
from pathlib import Path
from verifier.output import write_outputs
from verifier.results import Composition, Grading, JudgeResult, Status
grading = Grading("bench", (JudgeResult("a", "check", Status.OK, value=True),),
                  Composition(1.0, "default", True, (), {}))
out = Path(sys.argv[1])
for durable in (True, False):
    times = []
    for _ in range(50):
        started = time.perf_counter()
        write_outputs(out, grading, durable=durable)
        times.append(time.perf_counter() - started)
    print(1000 * statistics.median(times))
"""


def time_output_writes(python: str, out: Path) -> tuple[float, float]:
    """Median ms of output.write_outputs with and without fsync, in one process."""
    out.mkdir()
    completed = subprocess.run(
        [python, "-c", WRITES, str(out)], capture_output=True, text=True, check=True
    )
    durable, plain = (float(line) for line in completed.stdout.split())
    return durable, plain


def report_figures(
    runs: int,
    records: int,
    samples: dict[str, list[tuple[float, float]]],
    ours: dict[str, float],
    theirs: dict[str, float] | None,
) -> None:
    grade_wall = median_wall(samples["verifier grade"])
    grade_peak = max(peak for _, peak in samples["verifier grade"])
    print(f"verifier grade benchmark: 3 inline judges, median of {runs} interleaved runs")
    for name, timings in samples.items():
        wall = median_wall(timings)
        peak = max(p for _, p in timings)
        print(
            f"  {name:42s} {wall * 1000:7.1f} ms  peak {peak:5.1f} MiB  "
            f"({wall / grade_wall:4.2f}x grade)"
        )
    if theirs is None:
        print("  reference: not measured (set REF_DIR to its source tree); no ratio to quote")
    else:
        ref_wall = median_wall(samples["reference reward bridge"])
        ratio = grade_wall / ref_wall
        verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
        print(f"  ratio to the reference: {ratio:.2f}x (target <= {TARGET_RATIO}x): {verdict}")
        for name, timings in samples.items():
            if name.startswith("verifier grade at "):
                wall = median_wall(timings)
                print(
                    f"  ratio to the reference of {name[len('verifier grade at ') :]}: "
                    f"{wall / ref_wall:.2f}x"
                )
        stack = median_wall(samples[STACK_ROW]) / ref_wall
        built = median_wall(samples[RECORDS_ROW.format(records)]) / ref_wall
        print(
            f"  the stack's floor: importing attrs and PyYAML {stack:.2f}x the reference; "
            f"attrs and the grade's {records} records, without YAML, {built:.2f}x (before "
            "reading a file or running a judge)"
        )
        same = "same" if ours == theirs else f"DIFFERENT (ours {ours}, reference {theirs})"
        print(f"  reward.json of both: {same}")
    verdict = "PASS" if grade_peak < TARGET_PEAK_MIB else "FAIL"
    print(f"  peak memory {grade_peak:.1f} MiB (target < {TARGET_PEAK_MIB} MiB): {verdict}")


if __name__ == "__main__":
    main()
