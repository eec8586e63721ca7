"""Figures for `verifier batch` with an LLM judge: bound by the endpoint, not the CPU count.

Generates N cases (default 200) for an eval.yaml with one `llm_rubric` judge, starts
a local OpenAI-style endpoint (tests/llm_servers.py) that answers every request
after a fixed latency (default 1 s), and in the same run measures:

- `verifier batch --jobs J` (default --llm-concurrency 32, no cache): cases/s, and the
  requests in flight as the endpoint counted them and as the batch's summary did;
- one case per CPU, the model of the reference harness and of `verifier batch`
  before issue 13: `verifier grade` per case, J at a time, over a sample of cases;
- the rerun of the same batch answered from the response cache (`--force`).

Issue 13's target: at least 25 cases/s for 200 cases against a 1 s endpoint on 2 cores.

    python bench/llm_batch.py [--cases 200] [--jobs 2] [--latency 1.0] [--sample 20]
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

from common import REPO, installed_verifier

sys.path.insert(0, str(REPO))
from tests.llm_servers import FakeLLM, client_environment  # the test servers, not a copy

TARGET_CASES_PER_S = 25.0
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
    cases = root / "cases"
    for index in range(count):
        path = cases / f"case-{index:05d}" / "report.md"
        path.parent.mkdir(parents=True)
        path.write_text(f"Case {index}: the parser crashed on empty input; fixed with a guard.\n")
    return cases


def time_batch(
    verifier: str, config: Path, cases: Path, out: Path, env: dict[str, str], *args: str
) -> tuple[float, dict]:
    command = [verifier, "batch", "--config", str(config), "--cases", str(cases), "--out", str(out)]
    started = time.perf_counter()
    completed = subprocess.run([*command, *args], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit(f"batch failed:\n{completed.stderr}")
    summary = json.loads((out / ".batch" / "summary.json").read_text())
    if summary["graded"] != summary["count"] or summary["cases_with_judge_errors"]:
        raise SystemExit(f"batch did not grade every case cleanly: {completed.stdout}")
    return elapsed, summary


def time_grade_per_cpu(
    verifier: str, config: Path, cases: Path, out: Path, env: dict[str, str], jobs: int, sample: int
) -> float:
    """Cases/s of `verifier grade` per case, `jobs` at a time (one case per CPU)."""
    names = sorted(path.name for path in cases.iterdir())[:sample]

    def grade(name: str) -> None:
        command = [verifier, "grade", "--config", str(config), "--case", str(cases / name)]
        completed = subprocess.run(
            [*command, "--out", str(out / name)], capture_output=True, text=True, env=env
        )
        if completed.returncode != 0:
            raise SystemExit(f"grade failed:\n{completed.stderr}")

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(grade, names))
    return len(names) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds the endpoint takes")
    parser.add_argument("--sample", type=int, default=20, help="cases graded one per CPU")
    options = parser.parse_args()
    verifier = installed_verifier()
    server = FakeLLM("openai").start()
    server.default = server.grade(score=4)._replace(delay_s=options.latency)
    load = [os.getloadavg()[0]]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-llm-batch-") as scratch:
            root = Path(scratch)
            config = root / "eval.yaml"
            config.write_text(EVAL_YAML)
            cases = make_cases(root, options.cases)
            env = {**client_environment(server), "OPENAI_API_KEY": "sk-bench-0123456789abcdef"}
            jobs = ("--jobs", str(options.jobs))
            batch_s, summary = time_batch(
                verifier, config, cases, root / "out", env, *jobs, "--no-llm-cache"
            )
            peak_server = server.peak_in_flight
            server.peak_in_flight = 0
            per_cpu = time_grade_per_cpu(
                verifier, config, cases, root / "grade", env, options.jobs, options.sample
            )
            peak_per_cpu = server.peak_in_flight
            shutil.rmtree(root / "grade")
            time_batch(verifier, config, cases, root / "cached", env, *jobs)  # fills the cache
            sent = len(server.received)
            cached_s, cached = time_batch(verifier, config, cases, root / "cached", env, *jobs,
                                          "--force")  # fmt: skip
            if len(server.received) != sent:
                raise SystemExit("the cached rerun sent requests")
    finally:
        server.stop()
    load.append(os.getloadavg()[0])
    report(options, batch_s, summary, peak_server, per_cpu, peak_per_cpu, cached_s, cached, load)


def report(
    options: argparse.Namespace,
    batch_s: float,
    summary: dict,
    peak_server: int,
    per_cpu: float,
    peak_per_cpu: int,
    cached_s: float,
    cached: dict,
    load: list[float],
) -> None:
    n = options.cases
    rate = n / batch_s
    llm = summary["llm"]
    (endpoint,) = llm["endpoints"].values()
    cores = len(os.sched_getaffinity(0))
    print(
        f"{n} cases, one llm_rubric judge, endpoint latency {options.latency:g} s, "
        f"--jobs {options.jobs}, {cores} CPUs"
    )
    print(f"{'':44}{'cases/s':>10}{'in flight':>11}")
    print(f"{'verifier batch (--llm-concurrency 32)':44}{rate:10.1f}{peak_server:11d}")
    print(f"{'one case per CPU (grade x ' + str(options.jobs) + ' at a time)':44}"
          f"{per_cpu:10.1f}{peak_per_cpu:11d}")  # fmt: skip
    print(f"{'verifier batch, rerun from the cache':44}{n / cached_s:10.1f}{0:11d}")
    print(
        f"batch: {rate / per_cpu:.1f}x one case per CPU in the same run "
        f"({n} cases in {batch_s:.2f} s; per CPU: {options.sample} cases, extrapolated)"
    )
    print(
        f"in flight: the endpoint saw at most {peak_server}, the batch's gate counted "
        f"{endpoint['peak_in_flight']} of {endpoint['capacity']}; {llm['requests']} requests, "
        f"latency p50 {llm['latency_s']['p50']} s, p99 {llm['latency_s']['p99']} s"
    )
    print(
        f"cached rerun: {cached['llm']['cache_hits']} cache hits, "
        f"{cached['llm']['requests']} requests, {cached_s:.2f} s; "
        f"load average {load[0]:.1f} before, {load[1]:.1f} after (other load slows it)"
    )
    verdict = "meets" if rate >= TARGET_CASES_PER_S else "MISSES"
    print(f"target >= {TARGET_CASES_PER_S:.0f} cases/s: {verdict} ({rate:.1f})")


if __name__ == "__main__":
    main()
