"""Figures for `verifier grade` on a case with three inline judges.

Prints the median wall time and peak memory of `verifier grade`, beside a bare
interpreter start and an import of the CLI framework measured in the same run
(interleaved, so machine noise hits all of them alike), and the ratio to the
reference implementation (issue 2: at most 0.5x, peak < 40 MiB).

The reference cannot be run here; the issue quotes it at about 0.3 s on these
machines, where importing the CLI framework costs about 0.1 s. These shared
machines drift by half that from hour to hour, so the reference is scaled by
this run's typer import (0.3 s x typer / 0.1 s) and the ratio is taken against
that; the ratio to the plain 0.3 s is printed beside it.

    python bench/grade.py [--runs 21]

It grades with a regular install of this checkout (see bench/common.py).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from common import BENCH_VENV, THREE_INLINE_EVAL_YAML, installed_verifier

REFERENCE_SECONDS = 0.3
REFERENCE_TYPER_IMPORT_SECONDS = 0.1
TARGET_RATIO = 0.5
TARGET_PEAK_MIB = 40


def measure(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one run of command.

    The peak comes from GNU time: a child forked from this (larger) Python process
    would carry this process's RSS into its own high-water mark until it execs.
    """
    started = time.perf_counter()
    completed = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *command], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, check=False,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {completed.stderr}")
    return elapsed, int(completed.stderr.split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    options = parser.parse_args()
    verifier = installed_verifier()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "eval.yaml").write_text(THREE_INLINE_EVAL_YAML)
        (root / "case").mkdir()
        (root / "case" / "report.md").write_text("The bug is fixed. " * 30)
        commands = {
            "verifier grade (3 inline judges)": [
                verifier, "grade", "--config", str(root / "eval.yaml"),
                "--case", str(root / "case"), "--out", str(root / "out"),
            ],
            "python -c pass": [str(BENCH_VENV / "bin" / "python"), "-c", "pass"],
            "python -c 'import typer'": [str(BENCH_VENV / "bin" / "python"), "-c", "import typer"],
        }  # fmt: skip
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for command in commands.values():
            measure(command)  # warm the page cache and byte code
        for _ in range(options.runs):
            for name, command in commands.items():
                samples[name].append(measure(command))
    grade_name = next(iter(commands))
    grade_wall = statistics.median(wall for wall, _ in samples[grade_name])
    grade_peak = max(peak for _, peak in samples[grade_name])
    print(f"verifier grade benchmark: median of {options.runs} interleaved runs")
    for name, runs in samples.items():
        wall = statistics.median(w for w, _ in runs)
        peak = max(p for _, p in runs)
        print(f"  {name:36s} {wall * 1000:7.1f} ms  peak {peak:5.1f} MiB  "
              f"({wall / grade_wall:4.2f}x grade)")  # fmt: skip
    typer_wall = statistics.median(wall for wall, _ in samples["python -c 'import typer'"])
    reference = REFERENCE_SECONDS * typer_wall / REFERENCE_TYPER_IMPORT_SECONDS
    ratio = grade_wall / reference
    print(
        f"  ratio to the reference ({REFERENCE_SECONDS} s x typer import / "
        f"{REFERENCE_TYPER_IMPORT_SECONDS} s = {reference:.3f} s on this machine now): "
        f"{ratio:.2f}x (target <= {TARGET_RATIO}x): {'PASS' if ratio <= TARGET_RATIO else 'FAIL'}"
    )
    print(
        f"  ratio to the plain quoted {REFERENCE_SECONDS} s: {grade_wall / REFERENCE_SECONDS:.2f}x"
    )
    print(
        f"  peak memory {grade_peak:.1f} MiB (target < {TARGET_PEAK_MIB} MiB): "
        f"{'PASS' if grade_peak < TARGET_PEAK_MIB else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
