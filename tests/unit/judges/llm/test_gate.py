"""The endpoint gate finds the endpoint's pace: it grows while the endpoint keeps up,
halves on a throttle, holds when latency rises, never passes its ceiling. First the gate
itself, fed answers; then real batches against the local server's capacity model: an
endpoint that refuses past its capacity, one that queues past it, and a small one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.llm_servers import FakeLLM, client_environment
from verifier.batch import summary_paths
from verifier.judges.llm.gate import WINDOW, Gate

VERIFIER = str(Path(sys.executable).with_name("verifier"))


def answer(gate: Gate, count: int, latency_s: float = 1.0) -> None:
    """count requests answered, the gate kept full (as a batch with work waiting keeps it),
    each counted in flight until after its success, as the transport does."""
    for _ in range(count):
        while gate.in_flight < gate.limit:
            assert gate.enter(time.monotonic() + 1)
        gate.succeeded(latency_s)
        gate.leave()


def drain(gate: Gate) -> None:
    while gate.in_flight:
        gate.leave()


def test_a_batch_gate_doubles_each_round_trip_while_the_endpoint_keeps_up() -> None:
    gate = Gate(512, initial=16)
    assert gate.limit == 16
    answer(gate, 16)
    assert gate.limit == 32
    answer(gate, 32)
    assert gate.limit == 64


def test_a_throttle_halves_the_limit_and_the_gate_climbs_back_by_halves() -> None:
    gate = Gate(512, initial=16)
    answer(gate, 48)
    while gate.in_flight < gate.limit:
        assert gate.enter(time.monotonic() + 1)
    assert gate.limit == gate.in_flight == 64
    gate.throttle(10.0)
    gate.throttle(10.0)  # the same wave (its pause not over): halved once
    assert gate.limit == 32 and gate.throttled == 2
    gate.paused_until = 0.0  # the pause over (its length is the transport's business)
    drain(gate)
    answer(gate, 31)
    assert gate.limit == 32  # a round trip is `limit` successes
    climbed = []
    for _ in range(6):
        answer(gate, gate.limit)
        climbed.append(gate.limit)
    # half the way back to the 65 in flight (with the refused one) each round trip, then
    # past it one at a time
    assert climbed == [48, 56, 60, 62, 63, 64]
    for _ in range(3):
        answer(gate, gate.limit)
    assert 64 < gate.limit <= 64 + 4


def test_the_limit_grows_only_while_it_is_used() -> None:
    gate = Gate(512, initial=16)
    for _ in range(100):  # one request at a time: a quarter of the limit is never used
        assert gate.enter(time.monotonic() + 1)
        gate.succeeded(1.0)
        gate.leave()
    assert gate.limit == 16


def test_rising_latency_holds_the_limit_until_it_falls_back() -> None:
    gate = Gate(512, initial=16)
    answer(gate, WINDOW, latency_s=1.0)  # the baseline: a mean of 1 s
    held = gate.limit
    answer(gate, 3 * WINDOW, latency_s=2.0)  # a queue builds: answers take twice as long
    assert gate.limit < held + WINDOW  # grew only while the window's mean was below 1.5 s
    frozen = gate.limit
    answer(gate, 4 * WINDOW, latency_s=2.0)
    assert gate.limit == frozen
    answer(gate, WINDOW + 2 * frozen, latency_s=1.0)  # latency back: slow growth again
    assert frozen < gate.limit <= frozen + 3


def test_the_ceiling_is_never_passed() -> None:
    gate = Gate(40, initial=16)
    answer(gate, 200)
    assert gate.limit == 40
    assert gate.figures().capacity == 40


def test_a_gate_without_a_start_is_at_its_capacity() -> None:
    gate = Gate(3)  # grade's: one slot per sample
    assert gate.limit == 3
    answer(gate, 10)
    assert gate.limit == 3


def batch(tmp_path: Path, server: FakeLLM, cases: int, *args: str) -> dict:
    model = "openai/m" if server.style == "openai" else "anthropic/claude-m"
    root = tmp_path / "cases"
    for index in range(cases):
        (root / f"case-{index:04d}").mkdir(parents=True)
        (root / f"case-{index:04d}" / "report.md").write_text(f"report {index}")
    (tmp_path / "eval.yaml").write_text(
        textwrap.dedent("""
        name: paced
        outputs: [report.md]
        judges:
          - name: q
            llm_rubric: ok?
            score_range: [1, 5]
            model: MODEL
        """).replace("MODEL", model)
    )
    environment = {
        **client_environment(server),
        "VERIFIER_LLM_RETRIES": "20",
        "VERIFIER_LLM_BACKOFF": "0.2",
        "VERIFIER_LLM_MAX_WAIT": "2",
    }
    completed = subprocess.run(
        [
            VERIFIER,
            "batch",
            "--config",
            str(tmp_path / "eval.yaml"),
            "--cases",
            str(root),
            "--out",
            str(tmp_path / "out"),
            "-j",
            "2",
            "--no-llm-cache",
            *args,
        ],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    summary = json.loads(summary_paths(tmp_path / "out", None)[0].read_text())
    assert summary["graded"] == cases and summary["cases_with_judge_errors"] == 0
    return summary


def refused_share(server: FakeLLM) -> float:
    return server.refused / len(server.received)


@pytest.mark.slow
def test_a_batch_grows_to_a_large_endpoint_and_stays_below_its_refusals(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    openai_server.default = openai_server.grade(score=4)._replace(delay_s=0.3)
    openai_server.capacity = 96
    summary = batch(tmp_path, openai_server, 500)
    (gate,) = summary["llm"]["endpoints"].values()
    assert openai_server.peak_in_service > 32  # past where a fixed default of 32 stops
    assert gate["capacity"] == 512 and gate["peak_in_flight"] > 32
    assert refused_share(openai_server) < 0.10, (openai_server.refused, gate)


@pytest.mark.slow
def test_a_small_endpoint_sees_few_refusals(tmp_path: Path, llm_server: FakeLLM) -> None:
    llm_server.default = llm_server.grade(score=4)._replace(delay_s=0.2)
    llm_server.capacity = 16
    summary = batch(tmp_path, llm_server, 240)
    (gate,) = summary["llm"]["endpoints"].values()
    assert refused_share(llm_server) < 0.10, (llm_server.refused, gate)
    assert gate["throttled"] == llm_server.refused  # every refusal slowed the gate


@pytest.mark.slow
def test_a_queueing_endpoint_is_not_flooded(tmp_path: Path, openai_server: FakeLLM) -> None:
    """Past its capacity the endpoint queues (vLLM's way): answers come later, never 429.
    The gate must hold where latency rises instead of growing to its ceiling."""
    openai_server.default = openai_server.grade(score=4)._replace(delay_s=0.25)
    openai_server.capacity = 24
    openai_server.over_capacity = "queue"
    summary = batch(tmp_path, openai_server, 600)
    (gate,) = summary["llm"]["endpoints"].values()
    assert openai_server.refused == 0 and gate["throttled"] == 0
    assert openai_server.peak_in_service == 24
    assert 24 <= gate["peak_in_flight"] < 24 * 4, gate  # held, not grown to 512


@pytest.mark.slow
def test_the_ceiling_bounds_a_batch(tmp_path: Path, openai_server: FakeLLM) -> None:
    openai_server.default = openai_server.grade(score=4)._replace(delay_s=0.2)
    summary = batch(tmp_path, openai_server, 200, "--llm-concurrency", "20")
    (gate,) = summary["llm"]["endpoints"].values()
    assert openai_server.peak_in_flight <= 20 and gate["peak_in_flight"] == 20


def test_a_burst_of_answers_still_doubles_the_limit() -> None:
    """A round trip's answers arrive together, before any new request is sent: the gate
    was full all the same, and grows as it would one answer at a time."""
    gate = Gate(512, initial=16)
    for _ in range(16):
        assert gate.enter(time.monotonic() + 1)
    for _ in range(16):
        gate.succeeded(1.0)
        gate.leave()
    assert gate.limit == 32
