"""Figures for `verifier batch` with an LLM judge: the endpoint's capacity sets the pace.

Generates cases for an eval.yaml with one `llm_rubric` judge and starts local
OpenAI-style endpoints (tests/llm_servers.py) that answer after a fixed latency
(default 1 s) and serve at most so many requests at once, refusing the rest with a
429 (the capacity model). In the same run, side by side, it measures this tree's
`verifier batch --jobs J` (its default: gates that grow up to --llm-concurrency
512) and the same command of a baseline revision (default: main just before the
adaptive gate, a fixed 32 in flight; installed from `git archive` in its own venv):

- against an endpoint serving 256 at once, 1,000 cases: cases/s, the requests in
  flight at the endpoint's peak, the share it refused;
- against an endpoint serving 16 at once, 300 cases: the same;
- one case per CPU (`verifier grade` per case, J at a time, over a sample) and the
  rerun answered from the response cache, against the large endpoint.

Issue 20's targets: >= 100 cases/s against the 256-request, 1 s endpoint on 2 cores,
and fewer than 10% of the 16-request endpoint's requests refused.

    python bench/llm_batch.py [--cases 1000] [--small-cases 300] [--jobs 2]
        [--latency 1.0] [--sample 20] [--baseline REV]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import REPO, installed_revision, installed_verifier

sys.path.insert(0, str(REPO))
from tests.llm_servers import FakeLLM, client_environment  # the test servers, not a copy

TARGET_CASES_PER_S = 100.0
TARGET_REFUSED = 0.10
# main before issue 20 (the merge of the adaptive gate, 946de50): a fixed 32 in flight.
FIXED_GATE = "fc86099421bc78bd722d99b73431531702ce3dff"
LARGE, SMALL = 256, 16
EVAL_YAML = """\
name: bench-llm
outputs:
  - path: report.md
judges:
  - name: quality
    llm_rubric: Does the report say what was broken and how it was fixed?
    score_range: [1, 5]
    model: openai/bench-judge
"""


def make_cases(root: Path, count: int) -> Path:
    cases = root / f"cases-{count}"
    for index in range(count):
        path = cases / f"case-{index:05d}" / "report.md"
        path.parent.mkdir(parents=True)
        path.write_text(f"Case {index}: the parser crashed on empty input; fixed with a guard.\n")
    return cases


def endpoint(capacity: int, latency: float) -> FakeLLM:
    server = FakeLLM("openai").start()
    server.default = server.grade(score=4)._replace(delay_s=latency)
    server.capacity = capacity
    return server


class Run:
    """One `verifier batch` against a fresh endpoint: its figures."""

    def __init__(self, seconds: float, cases: int, summary: dict, server: FakeLLM) -> None:
        self.rate = cases / seconds
        self.seconds = seconds
        self.peak = server.peak_in_service
        self.sent = len(server.received)
        self.refused = server.refused / self.sent if self.sent else 0.0
        self.summary = summary


def time_batch(
    verifier: str, config: Path, cases: Path, out: Path, env: dict[str, str], *args: str
) -> tuple[float, dict]:
    command = [verifier, "batch", "--config", str(config), "--cases", str(cases), "--out", str(out)]
    started = time.perf_counter()
    completed = subprocess.run(
        [*command, *args], capture_output=True, text=True, env=env, check=False
    )
    elapsed = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit(f"batch failed:\n{completed.stderr}")
    summary = json.loads((out / ".batch" / "summary.json").read_text())
    if summary["graded"] != summary["count"] or summary["cases_with_judge_errors"]:
        raise SystemExit(f"batch did not grade every case cleanly: {completed.stdout}")
    return elapsed, summary


def measure(
    verifier: str, root: Path, cases: Path, capacity: int, latency: float, jobs: int
) -> Run:
    server = endpoint(capacity, latency)
    try:
        env = {**client_environment(server), "OPENAI_API_KEY": "sk-bench-0123456789abcdef"}
        out = Path(tempfile.mkdtemp(prefix="out-", dir=root))
        count = sum(1 for _ in cases.iterdir())
        seconds, summary = time_batch(
            verifier, root / "eval.yaml", cases, out, env, "--jobs", str(jobs), "--no-llm-cache"
        )
        return Run(seconds, count, summary, server)
    finally:
        server.stop()


def time_grade_per_cpu(
    verifier: str,
    config: Path,
    cases: Path,
    out: Path,
    env: dict[str, str],
    *,
    jobs: int,
    sample: int,
) -> float:
    """Cases/s of `verifier grade` per case, `jobs` at a time (one case per CPU)."""
    names = sorted(path.name for path in cases.iterdir())[:sample]

    def grade(name: str) -> None:
        command = [verifier, "grade", "--config", str(config), "--case", str(cases / name)]
        completed = subprocess.run(
            [*command, "--out", str(out / name)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if completed.returncode != 0:
            raise SystemExit(f"grade failed:\n{completed.stderr}")

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(grade, names))
    return len(names) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--small-cases", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds the endpoint takes")
    parser.add_argument("--sample", type=int, default=20, help="cases graded one per CPU")
    parser.add_argument("--baseline", default=FIXED_GATE, help="the git revision measured beside")
    options = parser.parse_args()
    verifier = installed_verifier()
    baseline, commit = installed_revision(options.baseline)
    load = [os.getloadavg()[0]]
    runs: dict[tuple[str, int], Run] = {}
    with tempfile.TemporaryDirectory(prefix="bench-llm-batch-") as scratch:
        root = Path(scratch)
        (root / "eval.yaml").write_text(EVAL_YAML)
        large, small = make_cases(root, options.cases), make_cases(root, options.small_cases)
        for capacity, cases in ((LARGE, large), (SMALL, small)):
            for name, command in (("baseline", baseline), ("this", verifier)):
                runs[name, capacity] = measure(
                    command, root, cases, capacity, options.latency, options.jobs
                )
        server = endpoint(LARGE, options.latency)
        try:
            env = client_environment(server)
            per_cpu = time_grade_per_cpu(
                verifier,
                root / "eval.yaml",
                large,
                root / "grade",
                env,
                jobs=options.jobs,
                sample=options.sample,
            )
            shutil.rmtree(root / "grade")
            jobs = ("--jobs", str(options.jobs))
            time_batch(verifier, root / "eval.yaml", large, root / "cached", env, *jobs)
            sent = len(server.received)
            cached_s, _ = time_batch(
                verifier, root / "eval.yaml", large, root / "cached", env, *jobs, "--force"
            )
            if len(server.received) != sent:
                raise SystemExit("the cached rerun sent requests")
        finally:
            server.stop()
    load.append(os.getloadavg()[0])
    report(options, commit, runs, per_cpu, options.cases / cached_s, load)


def report(
    options: argparse.Namespace,
    commit: str,
    runs: dict[tuple[str, int], Run],
    per_cpu: float,
    cached_rate: float,
    load: list[float],
) -> None:
    cores = len(os.sched_getaffinity(0))
    labels = {
        "baseline": f"{commit[:10]}, before the gate (fixed 32 in flight)"
        if options.baseline == FIXED_GATE
        else f"{options.baseline} {commit[:10]}",
        "this": "this tree (gates grow, ceiling 512)",
    }
    print(
        f"`verifier batch --jobs {options.jobs}`, one llm_rubric judge, endpoint latency "
        f"{options.latency:g} s, {cores} CPUs, one run each"
    )
    for capacity, count in ((LARGE, options.cases), (SMALL, options.small_cases)):
        print(f"\nendpoint serving {capacity} at once (429 past it), {count} cases:")
        print(f"  {'':48}{'cases/s':>9}{'seconds':>9}{'in flight':>11}{'refused':>9}")
        for name in ("baseline", "this"):
            run = runs[name, capacity]
            print(
                f"  {labels[name]:48}{run.rate:9.1f}{run.seconds:9.1f}{run.peak:11d}"
                f"{run.refused:9.1%}"
            )
        this, before = runs["this", capacity], runs["baseline", capacity]
        gate = next(iter(this.summary["llm"]["endpoints"].values()))
        print(
            f"  this tree / {commit[:10]}: {this.rate / before.rate:.2f}x the cases/s; "
            f"its gate: peak {gate['peak_in_flight']}, ended at {gate['limit']}, "
            f"{gate['throttled']} throttled answers of {this.sent} requests"
        )
    large = runs["this", LARGE]
    print(
        f"\none case per CPU (grade x {options.jobs} at a time, {options.sample} cases): "
        f"{per_cpu:.1f} cases/s, this tree's batch {large.rate / per_cpu:.0f}x that; "
        f"the rerun from the answer cache: {cached_rate:.0f} cases/s, no request"
    )
    print(f"load average {load[0]:.1f} before, {load[1]:.1f} after (other load slows it)")
    rate_ok = large.rate >= TARGET_CASES_PER_S
    refused = runs["this", SMALL].refused
    print(
        f"target >= {TARGET_CASES_PER_S:.0f} cases/s against the {LARGE} endpoint: "
        f"{'meets' if rate_ok else 'MISSES'} ({large.rate:.1f}); < {TARGET_REFUSED:.0%} "
        f"refused by the {SMALL} endpoint: {'meets' if refused < TARGET_REFUSED else 'MISSES'} "
        f"({refused:.1%})"
    )


if __name__ == "__main__":
    main()
