"""`verifier batch` with LLM judges, a real process against real local servers: the
requests of all cases share one bound per endpoint and fill it, a 429 or 503 pauses
every request to its endpoint, a rerun is answered from the cache, a new judge model
grades again, errored cases are retried, and API keys never reach a cache file.

Bounds are checked as counts, not timings: the servers hold every answer until as
many requests as the bound are in flight (`gather`), so a bound that is not used
shows as a lower peak, one that is exceeded as a higher one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.llm_servers import FakeLLM, Received, Reply, client_environment
from verifier.batch import summary_paths

VERIFIER = str(Path(sys.executable).with_name("verifier"))
KEY = "sk-batch-openai-0123456789abcdefghijklmn"
FAST = {
    "VERIFIER_LLM_REQUEST_TIMEOUT": "20",
    "VERIFIER_LLM_BACKOFF": "0.01",
    "VERIFIER_LLM_MAX_WAIT": "3",
    "VERIFIER_LLM_RETRIES": "2",
}


def eval_yaml(judges: str, top: str = "") -> str:
    return (
        textwrap.dedent("""
        name: llm-batch
        outputs:
          - path: report.md
        """)
        + top
        + "judges:\n"
        + textwrap.indent(textwrap.dedent(judges), "  ")
    )


QUALITY = """
- name: has_report
  builtin: file_exists
  arguments: {path: report.md}
- name: quality
  llm_rubric: Is the report clear?
  score_range: [1, 5]
  model: MODEL
"""


def make_cases(root: Path, count: int) -> Path:
    cases = root / "cases"
    for index in range(count):
        (cases / f"case-{index:03d}").mkdir(parents=True)
        (cases / f"case-{index:03d}" / "report.md").write_text(f"Report {index}: fixed.\n")
    return cases


def run_batch(
    root: Path, config: str, *servers: FakeLLM, args: tuple[str, ...] = (), **env: str
) -> tuple[subprocess.CompletedProcess[str], dict]:
    (root / "eval.yaml").write_text(config)
    environment = {**client_environment(*servers), **FAST, "OPENAI_API_KEY": KEY, **env}
    out = root / "out"
    completed = subprocess.run(
        [
            VERIFIER,
            "batch",
            "--config",
            str(root / "eval.yaml"),
            "--cases",
            str(root / "cases"),
            "--out",
            str(out),
            "-j",
            "2",
            *args,
        ],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed, json.loads(summary_paths(out, None)[0].read_text())


def judges_of(root: Path, case: str) -> dict:
    return json.loads((root / "out" / case / "judges.json").read_text())["per_judge"]


@pytest.mark.parametrize("style", ["openai", "anthropic"])
def test_all_cases_share_one_bound_per_endpoint_and_fill_it(tmp_path: Path, style: str) -> None:
    server = FakeLLM(style).start()
    try:
        server.default = server.grade(score=4)
        server.gather = 6  # every answer waits until 6 requests are in flight
        make_cases(tmp_path, 24)
        config = eval_yaml(QUALITY.replace("MODEL", f"{style}/judge-m"))
        completed, summary = run_batch(tmp_path, config, server, args=("--llm-concurrency", "6"))
    finally:
        server.stop()
    assert server.peak_in_flight == 6  # reached, never passed, with 2 CPU workers
    assert summary["graded"] == 24 and summary["cases_with_judge_errors"] == 0
    llm = summary["llm"]
    assert llm["concurrency_per_endpoint"] == 6
    assert llm["requests"] == 24 and llm["cache_hits"] == 0
    assert llm["tokens"] == {"judge-m": {"input": 321 * 24, "output": 12 * 24}}
    assert set(llm["latency_s"]) == {"p50", "p90", "p99", "max"}
    (figures,) = llm["endpoints"].values()
    assert figures["capacity"] == figures["peak_in_flight"] == figures["limit"] == 6
    assert figures["throttled"] == 0 and figures["baseline_latency_s"] > 0
    assert "llm_requests=24 cache_hits=0" in completed.stdout
    quality = judges_of(tmp_path, "case-007")["quality"]
    assert quality["value"] == 4.0 and quality["cached"] is False
    assert quality["model"] == "judge-m" and quality["usage"]["input_tokens"] == 321
    table = (tmp_path / "out" / ".batch" / "summary.csv").read_text().splitlines()
    assert table[0].endswith(
        "requests,cache_hits,input_tokens,output_tokens,timed_out_judges,cost_usd"
    )
    assert table[1].endswith(",1,0,321,12,,")  # judge-m has no price: its cost is unknown


def test_each_endpoint_has_its_own_bound(
    tmp_path: Path, openai_server: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    anthropic = FakeLLM("anthropic").start()
    try:
        for server in (openai_server, anthropic):
            server.default = server.grade(score=3)
            server.gather = 4
        make_cases(tmp_path, 12)
        judges = QUALITY.replace("MODEL", "openai/a") + textwrap.dedent("""
            - name: second
              llm_rubric: Is it complete?
              feedback_type: bool
              model: anthropic/claude-b
            """)
        anthropic.default = anthropic.grade(passed=True)
        _, summary = run_batch(
            tmp_path, eval_yaml(judges), openai_server, anthropic, args=("--llm-concurrency", "4")
        )
    finally:
        anthropic.stop()
    assert openai_server.peak_in_flight == anthropic.peak_in_flight == 4
    assert summary["llm"]["requests"] == 24
    assert sorted(
        figures["peak_in_flight"] for figures in summary["llm"]["endpoints"].values()
    ) == [
        4,
        4,
    ]


def test_samples_of_a_judge_are_asked_side_by_side(tmp_path: Path, openai_server: FakeLLM) -> None:
    openai_server.default = openai_server.grade(score=2)
    openai_server.gather = 3  # one case: its 3 samples must be in flight at once
    make_cases(tmp_path, 1)
    config = eval_yaml(QUALITY.replace("MODEL", "openai/m") + "  samples: 3\n")
    _, summary = run_batch(tmp_path, config, openai_server)
    assert openai_server.peak_in_flight == 3
    quality = judges_of(tmp_path, "case-000")["quality"]
    assert quality["value"] == 2.0 and quality["sample_values"] == [2.0, 2.0, 2.0]
    assert summary["llm"]["requests"] == 3


@pytest.mark.slow
def test_a_rerun_is_answered_from_the_cache_and_keys_never_reach_it(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    # a proxy that echoes the key into the answer
    openai_server.default = openai_server.grade(score=5, rationale=f"key was Bearer {KEY}")
    make_cases(tmp_path, 8)
    config = eval_yaml(QUALITY.replace("MODEL", "openai/m"))
    _, first = run_batch(tmp_path, config, openai_server)
    assert first["llm"]["requests"] == 8 and len(openai_server.received) == 8
    cache_files = list((tmp_path / "out" / ".llm-cache").rglob("*.json"))
    assert len(cache_files) == 8
    for path in cache_files:
        assert KEY not in path.read_text()
    completed, again = run_batch(tmp_path, config, openai_server, args=("--force",))
    assert len(openai_server.received) == 8  # nothing sent
    assert again["llm"]["requests"] == 0 and again["llm"]["cache_hits"] == 8
    assert again["graded"] == 8 and again["resumed"] == 0
    quality = judges_of(tmp_path, "case-003")["quality"]
    assert quality["cached"] is True and quality["value"] == 5.0
    assert quality["attempts"] == 0 and "[redacted]" in quality["rationale"]
    assert "llm_requests=0 cache_hits=8" in completed.stdout
    _, uncached = run_batch(tmp_path, config, openai_server, args=("--force", "--no-llm-cache"))
    assert uncached["llm"]["cache"] is None and len(openai_server.received) == 16


@pytest.mark.slow
def test_a_new_judge_model_grades_again_and_misses_the_cache(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    openai_server.default = openai_server.grade(score=3)
    make_cases(tmp_path, 6)
    config = eval_yaml(QUALITY.replace("  model: MODEL\n", ""))  # the model from the env
    _, first = run_batch(tmp_path, config, openai_server, EVAL_JUDGE_MODEL="openai/old")
    _, same = run_batch(tmp_path, config, openai_server, EVAL_JUDGE_MODEL="openai/old")
    assert same["resumed"] == 6 and len(openai_server.received) == 6
    _, changed = run_batch(tmp_path, config, openai_server, EVAL_JUDGE_MODEL="openai/new")
    assert changed["resumed"] == 0 and changed["config_hash"] != first["config_hash"]
    assert changed["llm"]["requests"] == 6 and changed["llm"]["cache_hits"] == 0
    assert [r.body["model"] for r in openai_server.received[6:]] == ["new"] * 6
    assert judges_of(tmp_path, "case-000")["quality"]["model"] == "new"


def test_an_unreachable_endpoint_is_judge_errors_not_failed_cases(tmp_path: Path) -> None:
    dead = FakeLLM("openai").start()
    dead.stop()  # nothing listens on its port any more
    make_cases(tmp_path, 4)
    completed, summary = run_batch(tmp_path, eval_yaml(QUALITY.replace("MODEL", "openai/m")), dead)
    assert summary["errors"] == 0  # every case got a reward...
    assert summary["cases_with_judge_errors"] == 4 == summary["judges_errored"]  # ...but not graded
    assert "errors=0 judge_errors=4 judge_timeouts=0 with_judge_errors=4" in completed.stdout
    assert summary["llm"]["requests"] == 12  # 3 attempts each (VERIFIER_LLM_RETRIES=2)
    quality = judges_of(tmp_path, "case-000")["quality"]
    assert quality["status"] == "error" and "connection refused" in quality["error"]


@pytest.mark.slow
def test_cases_whose_judges_errored_are_graded_again(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    openai_server.default = openai_server.error(503, "overloaded")
    make_cases(tmp_path, 4)
    config = eval_yaml(QUALITY.replace("MODEL", "openai/m"))
    retries = {"VERIFIER_LLM_RETRIES": "0"}
    _, first = run_batch(tmp_path, config, openai_server, **retries)
    assert first["cases_with_judge_errors"] == 4 and len(openai_server.received) == 4
    openai_server.default = openai_server.grade(score=4)  # the endpoint is back
    _, kept = run_batch(tmp_path, config, openai_server, args=("--keep-errors",), **retries)
    assert kept["resumed"] == 4 and len(openai_server.received) == 4
    _, second = run_batch(tmp_path, config, openai_server, **retries)
    assert second["resumed"] == 0 and second["cases_with_judge_errors"] == 0
    assert len(openai_server.received) == 8
    assert judges_of(tmp_path, "case-002")["quality"]["value"] == 4.0
    _, third = run_batch(tmp_path, config, openai_server, **retries)
    assert third["resumed"] == 4 and len(openai_server.received) == 8


@pytest.mark.slow
@pytest.mark.parametrize(
    ("status", "headers", "backoff", "pause_s"),
    [
        (429, {"Retry-After": "1.5"}, "0.01", 1.5),  # the endpoint says how long
        (503, {}, "1.2", 0.6),  # the backoff decides: at least half the first wait
    ],
)
def test_a_throttled_endpoint_pauses_every_request_to_it(
    tmp_path: Path,
    openai_server: FakeLLM,
    status: int,
    headers: dict,
    backoff: str,
    pause_s: float,
) -> None:
    """The first request gets the 429/503 once the 3 others of its wave have arrived;
    those are held for 1 s, so their threads are free only after the throttle: without
    one pause for every request they would send the next cases at once."""
    lock = threading.Lock()
    throttled: list[float] = []

    def route(request: Received) -> Reply:
        with lock:
            first = not throttled
            if first:
                throttled.append(request.at)
        if first:
            limit = time.monotonic() + 10
            while len(openai_server.received) < 4 and time.monotonic() < limit:
                time.sleep(0.01)
            return openai_server.error(status, "slow down", headers)
        if request.at < throttled[0] + 0.5:
            return openai_server.grade(score=4)._replace(delay_s=1.0)
        return openai_server.grade(score=4)

    openai_server.route = route
    make_cases(tmp_path, 8)
    config = eval_yaml(QUALITY.replace("MODEL", "openai/m"))
    _, summary = run_batch(
        tmp_path,
        config,
        openai_server,
        args=("--llm-concurrency", "4"),
        VERIFIER_LLM_BACKOFF=backoff,
    )
    sent_429 = min(when for when, code in openai_server.replied if code == status)
    later = [r.at for r in openai_server.received if r.at > sent_429]
    assert later and min(later) >= sent_429 + pause_s - 0.05
    assert summary["graded"] == 8 and summary["cases_with_judge_errors"] == 0
    (figures,) = summary["llm"]["endpoints"].values()
    assert figures["throttled"] == 1
    assert len(openai_server.received) == 9  # the throttled request once more, nothing else


def test_a_model_that_rejects_temperature_is_remembered_for_the_batch(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    def route(request: Received) -> Reply:
        if "temperature" in request.body:
            return openai_server.error(
                400, "Unsupported value: 'temperature' does not support 0 with this model."
            )
        return openai_server.grade(score=4)

    openai_server.route = route
    make_cases(tmp_path, 5)
    config = eval_yaml(QUALITY.replace("MODEL", "openai/house-reasoner"))
    _, summary = run_batch(tmp_path, config, openai_server, args=("--llm-concurrency", "1"))
    assert summary["graded"] == 5 and summary["cases_with_judge_errors"] == 0
    with_temperature = [r for r in openai_server.received if "temperature" in r.body]
    assert len(with_temperature) == 1 and len(openai_server.received) == 6
    assert summary["llm"]["requests"] == 6


@pytest.mark.slow
def test_a_prompt_that_takes_the_whole_timeout_is_a_timeout_record(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    make_cases(tmp_path, 2)
    endless = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    judges = QUALITY.replace("MODEL", "openai/m").replace(
        "llm_rubric: Is the report clear?", f"prompt: '{endless}{{{{ stdout }}}}'\n  timeout: 1"
    )
    _, summary = run_batch(tmp_path, eval_yaml(judges), openai_server)
    assert summary["graded"] == 2 and summary["cases_with_judge_errors"] == 2
    quality = judges_of(tmp_path, "case-000")["quality"]
    assert quality["status"] == "timeout" and "timed out after 1s" in quality["error"]
    assert openai_server.received == []


def test_a_dead_llm_stage_is_error_rows_for_its_cases_and_a_new_one_takes_over(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    release = hold_requests(openai_server)
    make_cases(tmp_path, 30)
    (tmp_path / "eval.yaml").write_text(eval_yaml(QUALITY.replace("MODEL", "openai/m")))
    environment = {**client_environment(openai_server), **FAST}
    process = subprocess.Popen(
        [
            VERIFIER,
            "batch",
            "--config",
            str(tmp_path / "eval.yaml"),
            "--cases",
            str(tmp_path / "cases"),
            "--out",
            str(tmp_path / "out"),
            "-j",
            "2",
            "--llm-concurrency",
            "4",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    stderr = kill_the_llm_stage(process, openai_server, release)
    assert process.returncode == 0, stderr
    summary = json.loads(summary_paths(tmp_path / "out", None)[0].read_text())
    failed = [row for row in summary["cases"] if row["status"] == "error"]
    assert failed and all(
        "the LLM request process was killed by SIGKILL" in row["error"] for row in failed
    )
    # the cases waiting on it: at most the bound (2 x 4 requests) and one per worker
    assert summary["graded"] == 30 - len(failed) and len(failed) <= 8 + 2


def hold_requests(server: FakeLLM) -> threading.Event:
    """Requests wait at the server until the event is set, then get a grade."""
    release = threading.Event()

    def route(request: Received) -> Reply:
        release.wait(30)
        return server.grade(score=4)

    server.route = route
    return release


def kill_the_llm_stage(
    process: subprocess.Popen[str], server: FakeLLM, release: threading.Event
) -> str:
    """Once 4 requests of the batch are at the server (held there until release is
    set), SIGKILL its LLM stage (its one process with threads); the batch's stderr."""
    try:
        deadline = time.monotonic() + 30
        while len(server.received) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        (stage,) = [pid for pid in children_of(process.pid) if threads_of(pid) > 1]
        os.kill(stage, signal.SIGKILL)
        time.sleep(0.5)
        release.set()
        return process.communicate(timeout=60)[1]
    finally:
        release.set()
        process.kill()


def children_of(pid: int) -> list[int]:
    listing = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, check=False
    )
    return [int(line) for line in listing.stdout.split()]


def threads_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))


@pytest.mark.slow
def test_a_429_storm_is_met_by_fewer_requests_not_more(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    """For its first second the endpoint answers every request 429 (Retry-After 0.2 s).
    Eight threads each retrying on their own would send about 8 requests per 0.2 s;
    the shared gate halves what goes in flight at each pause and sends a handful."""
    storm: list[float] = []

    def route(request: Received) -> Reply:
        storm.append(storm[0] if storm else request.at)
        if request.at < storm[0] + 1.0:
            return openai_server.error(429, "rate limited", {"Retry-After": "0.2"})
        return openai_server.grade(score=4)

    openai_server.route = route
    make_cases(tmp_path, 16)
    config = eval_yaml(QUALITY.replace("MODEL", "openai/m"))
    _, summary = run_batch(
        tmp_path,
        config,
        openai_server,
        args=("--llm-concurrency", "8"),
        VERIFIER_LLM_RETRIES="20",
    )
    assert summary["graded"] == 16 and summary["cases_with_judge_errors"] == 0
    during = [r for r in openai_server.received if r.at < storm[0] + 1.0]
    assert len(during) <= 8 + 4 + 2 + 1 * 3  # the first wave, then at most the halved limits
    (figures,) = summary["llm"]["endpoints"].values()
    assert figures["throttled"] == len(during)
