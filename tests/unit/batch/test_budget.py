"""`verifier batch --max-cost-usd`: a case's requests are reserved at their most before
they go, so that no request is sent that could take the total past the budget, whatever
the concurrency, and N shards over one --out share one budget through a ledger file.

The books' arithmetic is pure (verifier.batch.budget); the ledger file is hammered by
real processes at once; the batches run against the real local HTTP servers of
tests/llm_servers.py, which answer every request with 321 input and 12 output tokens."""

from __future__ import annotations

import json
import multiprocessing
import random
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.llm_servers import FakeLLM, Received, client_environment, serve
from tests.unit.batch.test_llm_stage import hold_requests, kill_the_llm_stage
from tests.unit.judges.llm.test_pricing import batch_command, run_batch, usd
from verifier.batch import summary_paths
from verifier.batch.budget import (
    UNAFFORDABLE,
    Account,
    Books,
    FileLedger,
    Verdict,
    abandon,
    open_purse,
    reserve,
    settle,
    take_over,
    units,
)
from verifier.batch.cases import Shard
from verifier.errors import EXIT_BUDGET, EXIT_CONFIG, EXIT_TERMINATED, UsageError
from verifier.judges.llm.tokens import REQUEST_OVERHEAD_TOKENS, estimate_tokens, token_ceiling

pytestmark = pytest.mark.usefixtures("llm_env")
GPT_4O, GPT_4O_MINI = (2.5, 10.0), (0.15, 0.60)  # USD per million input/output tokens


# --- the books -----------------------------------------------------------------------


def test_a_reservation_is_granted_only_while_everything_committed_fits() -> None:
    books, verdict = reserve(Books(100), "a", 60)
    assert verdict is Verdict.GRANTED and books.account("a") == Account(reserved=60)
    books, verdict = reserve(books, "a", 50)  # 110 > 100, but a's 60 may settle lower
    assert verdict is Verdict.WAIT and books.committed == 60
    books = settle(books, "a", 60, 10)
    books, verdict = reserve(books, "a", 50)
    assert verdict is Verdict.GRANTED and books.committed == 60
    books, verdict = reserve(books, "b", 41)  # b holds nothing that could make room
    assert verdict is Verdict.REFUSED and books.account("b") == Account(refused=1)
    books, verdict = reserve(books, "b", 40)
    assert verdict is Verdict.GRANTED and books.committed == 100
    assert books.total() == Account(spent=10, reserved=90, refused=1)


def test_what_a_run_leaves_out_is_counted_in_full() -> None:
    books = Books(100, {"a": Account(spent=5, reserved=30), "b": Account(reserved=20)})
    assert abandon(books, "a", 10).account("a") == Account(spent=5, reserved=20, unsettled=10)
    mine = take_over(books, frozenset({"a"}))
    assert mine.account("a") == Account(spent=5, unsettled=30)
    assert mine.account("b") == Account(reserved=20)  # another shard's: it may still run
    every = take_over(books, None)
    assert every.total() == Account(spent=5, unsettled=50) and every.committed == 55


def test_amounts_round_up_to_picodollars() -> None:
    assert units(0.0009225) >= 0.0009225 * 10**12
    assert units(1e-13) == 1  # never rounded down to nothing
    assert units(float("inf")) == UNAFFORDABLE


# --- the token ceiling ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["plain English text", "a b c d e f g", "漢字かな交じり文", "emoji 🙂🙂", "x" * 1000, ""],
)
def test_the_token_ceiling_is_the_texts_bytes_and_the_overhead(text: str) -> None:
    """A byte-level BPE token covers at least one byte: no tokenizer counts more."""
    ceiling = token_ceiling(text, "system")
    assert ceiling == len(text.encode()) + len(b"system") + REQUEST_OVERHEAD_TOKENS
    assert ceiling >= estimate_tokens(text)


# --- the ledger file -----------------------------------------------------------------


def _spender(path: str, seed: int, start: Any, found: Any) -> None:
    """A process reserving and settling against the shared ledger once every one is
    ready (start: a Barrier); it puts (granted, spent by it, the most ever committed
    that it saw) in found (a Queue)."""
    chooser = random.Random(seed)
    ledger = FileLedger(Path(path), "t", 100_000)
    holder = f"p{seed}"
    granted = spent = most = 0
    start.wait()
    for _ in range(400):
        amount = chooser.randint(100, 900)
        verdict = ledger.change(lambda books, amount=amount: reserve(books, holder, amount))
        if verdict is Verdict.GRANTED:
            cost = chooser.randint(0, amount)
            most = max(most, ledger.change(lambda books: (books, books.committed)))
            ledger.change(
                lambda books, amount=amount, cost=cost: (settle(books, holder, amount, cost), None)
            )
            granted, spent = granted + 1, spent + cost
    found.put((granted, spent, most))


@pytest.mark.slow
def test_processes_sharing_a_ledger_file_stay_within_its_budget(tmp_path: Path) -> None:
    """Without the lock, changes made at once overwrite each other: the file's total
    would not be what the processes spent."""
    path = str(tmp_path / "budget.t.json")
    context = multiprocessing.get_context("spawn")
    start, queue = context.Barrier(4), context.Queue()
    processes = [
        context.Process(target=_spender, args=(path, seed, start, queue)) for seed in range(4)
    ]
    for process in processes:
        process.start()
    found = [queue.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(10)
    books = Books.from_json(json.loads(Path(path).read_text()))
    assert books.total().spent == sum(spent for _, spent, _ in found) <= 100_000
    assert books.total().reserved == 0 and all(most <= 100_000 for _, _, most in found)
    assert all(granted for granted, _, _ in found) and books.total().refused > 0


def test_a_ledger_of_another_budget_or_not_a_ledger_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "budget.t.json"
    FileLedger(path, "t", 10).change(lambda books: (reserve(books, "a", 1)[0], None))
    with pytest.raises(UsageError, match=r"--max-cost-usd 2e-11: the budget shared in .* is 1e-11"):
        FileLedger(path, "t", 20).change(lambda books: (books, None))
    path.write_text('{"max_cost_picousd": 10, "accounts": {"a": {"spent": -1}}}')
    with pytest.raises(UsageError, match=r"not a budget ledger .*remove it to start a new budget"):
        FileLedger(path, "t", 10).change(lambda books: (books, None))


def test_a_shard_takes_over_what_its_earlier_run_left_reserved(tmp_path: Path) -> None:
    path = tmp_path / "budget.t.json"
    left = Books(
        units(1.0), {"shard-0-of-2": Account(reserved=7), "shard-1-of-2": Account(reserved=5)}
    )
    path.write_text(json.dumps(left.to_json()))
    open_purse(1.0, (path, "t"), "shard-0-of-2", exclusive=False)
    books = Books.from_json(json.loads(path.read_text()))
    assert books.account("shard-0-of-2") == Account(unsettled=7)
    assert books.account("shard-1-of-2") == Account(reserved=5)
    open_purse(1.0, (path, "t"), "batch", exclusive=True)  # no shard runs beside it
    assert Books.from_json(json.loads(path.read_text())).total() == Account(unsettled=12)


# --- batches against a real local endpoint --------------------------------------------


def start_batch(command: list[str], server: FakeLLM) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=client_environment(server),
    )


def ceiling_usd(request: Received, max_tokens: int, price: tuple[float, float]) -> float:
    """What the docs say a request reserves: its texts' bytes as tokens (system, user, the
    tool's schema) plus the overhead, and the whole max_tokens."""
    schema = json.dumps(request.body["tools"][0]["function"]["parameters"])
    texts = (request.system, request.user, schema)
    tokens = sum(len(text.encode()) for text in texts) + REQUEST_OVERHEAD_TOKENS
    return (tokens * price[0] + max_tokens * price[1]) / 1e6


@pytest.mark.slow
@pytest.mark.parametrize(
    "concurrency",
    [(), ("-j", "4"), ("--llm-concurrency", "2")],
    ids=["default", "four-workers", "two-requests"],
)
def test_300_cases_spend_no_more_than_the_budget_whatever_the_concurrency(
    tmp_path: Path, openai_server: FakeLLM, concurrency: tuple[str, ...]
) -> None:
    """gpt-4o-mini: a case reserves ~0.0009 USD (max_tokens 1024) and costs 0.0000554, so
    a budget of 0.01 funds about ten at once and about 165 in all."""
    openai_server.default = openai_server.grade(score=4)._replace(delay_s=0.05)
    completed, summary = run_batch(
        tmp_path,
        openai_server,
        300,
        "--max-cost-usd",
        "0.01",
        *concurrency,
        model="openai/gpt-4o-mini",
    )
    assert completed.returncode == EXIT_BUDGET, completed.stderr
    budget, graded, sent = summary["budget"], summary["graded"], len(openai_server.received)
    each = usd(*GPT_4O_MINI)
    assert graded == sent and summary["errors"] == 0
    assert budget["spent_usd"] == pytest.approx(sent * each, abs=1e-6)
    assert sent * each <= 0.01 and budget["spent_usd"] <= 0.01
    reserved = ceiling_usd(openai_server.received[0], 1024, GPT_4O_MINI)
    assert budget["reserved_usd"] == pytest.approx(sent * reserved, rel=1e-3)
    # Refused only once nothing more could be afforded, not at the first full wave.
    assert budget["spent_usd"] + reserved > 0.01 and graded > 0.01 / reserved
    assert budget["refused_cases"] >= 1 and budget["unsettled_usd"] == 0
    assert budget["refused_cases"] + budget["cases_not_started"] == 300 - graded
    if not concurrency or concurrency[0] == "-j":
        assert openai_server.peak_in_flight > 1  # the budget let several go at once
    else:
        assert openai_server.peak_in_flight <= 2


@pytest.mark.slow
def test_the_issues_batch_sends_nothing_a_case_could_take_past_the_budget(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    """gpt-4o with max_tokens 1024 may cost 0.0102 USD in output alone: more than 0.01,
    so no request is sent, and the warning says why and what to change."""
    openai_server.default = openai_server.grade(score=4)._replace(delay_s=1.0)
    completed, summary = run_batch(tmp_path, openai_server, 300, "--max-cost-usd", "0.01")
    assert completed.returncode == EXIT_BUDGET, completed.stderr
    assert openai_server.received == [] and summary["graded"] == 0
    budget = summary["budget"]
    assert budget["spent_usd"] == 0 and 1 <= budget["refused_cases"] <= 2  # the cases begun
    assert budget["cases_not_started"] + budget["refused_cases"] == 300
    assert budget["dearest_refused_usd"] > 0.01
    assert "more than --max-cost-usd 0.01 itself: raise it, or lower VERIFIER_LLM_MAX_TOKENS" in (
        completed.stderr
    )
    assert "BUDGET SPENT (0.0000 of 0.01 USD): 300 cases not graded" in completed.stdout
    assert not list((tmp_path / "out").glob("*/reward.json"))


@pytest.mark.slow
def test_shards_running_at_once_share_one_budget(tmp_path: Path, openai_server: FakeLLM) -> None:
    """Three `--shard I/3` processes over one --out: each alone could spend 0.01."""
    openai_server.default = openai_server.grade(score=4)._replace(delay_s=0.05)
    command = batch_command(tmp_path, 300, "openai/gpt-4o-mini")
    shards = [
        start_batch([*command, "--shard", f"{index}/3", "--max-cost-usd", "0.01"], openai_server)
        for index in range(3)
    ]
    ended = [shard.communicate(timeout=120) for shard in shards]
    codes = [shard.returncode for shard in shards]
    assert set(codes) <= {0, EXIT_BUDGET} and EXIT_BUDGET in codes, ended
    summaries = [
        json.loads(summary_paths(tmp_path / "out", Shard(index, 3))[0].read_text())
        for index in range(3)
    ]
    spent = [summary["budget"]["spent_usd"] for summary in summaries]
    sent = len(openai_server.received)
    assert sent * usd(*GPT_4O_MINI) <= 0.01 and sum(spent) <= 0.01
    assert sum(spent) == pytest.approx(sent * usd(*GPT_4O_MINI), abs=1e-5)
    assert sum(summary["graded"] for summary in summaries) == sent > 0.01 / 0.001
    ledger = tmp_path / "out" / ".batch" / "budget.default.json"
    books = Books.from_json(json.loads(ledger.read_text()))
    assert set(books.accounts) == {f"shard-{index}-of-3" for index in range(3)}
    assert books.total().reserved == 0 and books.total().unsettled == 0
    assert books.total().spent == pytest.approx(units(sent * usd(*GPT_4O_MINI)), rel=1e-6)
    last = summaries[-1]["budget"]["shared"]
    assert last["file"] == str(ledger) and last["budget_id"] == "default"
    assert last["spent_usd"] <= 0.01
    stopped = [out for (out, _), code in zip(ended, codes, strict=True) if code == EXIT_BUDGET]
    assert all(
        re.search(r"BUDGET SPENT \(0\.\d{4} of 0\.01 USD here, 0\.\d{4} in all\)", out)
        for out in stopped
    )


@pytest.mark.slow
def test_batches_naming_one_budget_id_spend_it_together(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    openai_server.default = openai_server.grade(score=4)
    small = {"VERIFIER_LLM_MAX_TOKENS": "64"}  # a case reserves ~0.005 USD: six are funded
    budget = ("--max-cost-usd", "0.01", "--budget-id", "run-1")
    first, summary = run_batch(tmp_path, openai_server, 20, *budget, env=small)
    assert first.returncode == EXIT_BUDGET and summary["graded"] == 6
    again, summary = run_batch(tmp_path, openai_server, 20, *budget, env=small)
    assert again.returncode == EXIT_BUDGET and summary["graded"] == 0
    assert summary["resumed"] == 6 and len(openai_server.received) == 6
    assert summary["budget"]["shared"]["spent_usd"] == pytest.approx(usd(*GPT_4O, 6), abs=1e-6)
    assert summary["budget"]["spent_usd"] == 0  # this run's: the account also holds the first's
    other = ("--max-cost-usd", "0.01", "--budget-id", "run-2")
    fresh, summary = run_batch(tmp_path, openai_server, 20, *other, env=small)
    assert fresh.returncode == EXIT_BUDGET and summary["graded"] == 6


@pytest.mark.parametrize("budget_id", ["../x", ".hidden", "a b", "x" * 129])
def test_a_budget_id_that_cannot_name_a_file_is_a_usage_error(
    tmp_path: Path, openai_server: FakeLLM, budget_id: str
) -> None:
    args = ("--max-cost-usd", "1", "--budget-id", budget_id)
    completed, summary = run_batch(tmp_path, openai_server, 1, *args)
    assert completed.returncode == EXIT_CONFIG and summary is None
    assert f"--budget-id: {budget_id!r}: use up to 128 letters" in completed.stderr
    assert openai_server.received == []


@pytest.mark.slow
def test_a_shared_budget_given_another_amount_is_refused(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    openai_server.default = openai_server.grade(score=4)
    first, _ = run_batch(tmp_path, openai_server, 1, "--max-cost-usd", "1", "--budget-id", "b")
    assert first.returncode == 0, first.stderr
    completed, _ = run_batch(tmp_path, openai_server, 2, "--max-cost-usd", "2", "--budget-id", "b")
    assert completed.returncode == EXIT_CONFIG
    assert "--max-cost-usd 2: the budget shared in" in completed.stderr
    assert "budget.b.json is 1 USD; give the same, or another --budget-id" in completed.stderr
    assert len(openai_server.received) == 1


@pytest.mark.slow
def test_a_batch_stopped_with_requests_out_counts_them_in_full(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    openai_server.default = openai_server.hang(30)
    command = [*batch_command(tmp_path, 4), "--max-cost-usd", "1", "--budget-id", "b"]
    batch = start_batch(command, openai_server)
    deadline = time.monotonic() + 30
    while openai_server.in_flight < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert openai_server.in_flight == 4
    batch.send_signal(signal.SIGTERM)
    _, err = batch.communicate(timeout=60)
    assert batch.returncode == EXIT_TERMINATED, err
    budget = json.loads(summary_paths(tmp_path / "out", None)[0].read_text())["budget"]
    reserved = 4 * ceiling_usd(openai_server.received[0], 1024, GPT_4O)
    assert budget["spent_usd"] == 0 and budget["reserved_usd"] == pytest.approx(reserved, rel=1e-3)
    assert budget["unsettled_usd"] == pytest.approx(reserved, rel=1e-3)
    assert budget["shared"]["unsettled_usd"] == budget["unsettled_usd"]


@pytest.mark.slow
def test_the_cases_of_a_dead_llm_stage_count_in_full(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    """Their requests were out when it died: what they cost will never be known."""
    release = hold_requests(openai_server)
    command = [*batch_command(tmp_path, 12), "--llm-concurrency", "4", "--max-cost-usd", "1"]
    process = start_batch(command, openai_server)
    stderr = kill_the_llm_stage(process, openai_server, release)
    assert process.returncode == 0, stderr
    summary = json.loads(summary_paths(tmp_path / "out", None)[0].read_text())
    failed = [row for row in summary["cases"] if row["status"] == "error"]
    budget, each = summary["budget"], ceiling_usd(openai_server.received[0], 1024, GPT_4O)
    assert failed and budget["unsettled_usd"] == pytest.approx(len(failed) * each, rel=1e-3)
    assert budget["spent_usd"] == pytest.approx(usd(*GPT_4O, summary["graded"]), abs=1e-6)
    assert budget["reserved_usd"] == pytest.approx(12 * each, rel=1e-3)


# --- what a judge of several requests, or with a thinking budget, reserves --------------

INDIVIDUAL = """
name: costed
outputs: [report.md]
judges:
  - name: review
    model: MODEL
    mode: individual
    criteria:
      - {name: names_bug, description: Does it name the bug?}
      - {name: clarity, description: How clear is it?, type: likert, points: 5}
"""
THINKING = """
name: costed
outputs: [report.md]
judges:
  - name: q
    llm_rubric: ok?
    score_range: [1, 5]
    model: MODEL
    reasoning_effort: high
"""


def request_ceiling_usd(request: Received, price: tuple[float, float]) -> float:
    """A request's reservation as the docs give it, from what the endpoint received: its
    texts' bytes (system, user, the answer's schema) plus the overhead, and the
    max_tokens its body carries (for Anthropic, the thinking budget on top)."""
    tools = request.body["tools"][0]
    schema = tools["function"]["parameters"] if "function" in tools else tools["input_schema"]
    texts = (request.system, request.user, json.dumps(schema))
    tokens = sum(len(text.encode()) for text in texts) + REQUEST_OVERHEAD_TOKENS
    return (tokens * price[0] + request.body["max_tokens"] * price[1]) / 1e6


@pytest.mark.parametrize(
    ("judges", "model", "price", "requests"),
    [
        (INDIVIDUAL, "openai/gpt-4o-mini", GPT_4O_MINI, 2),
        (THINKING, "anthropic/claude-sonnet-4-5", (3.0, 15.0), 1),
    ],
    ids=["a request per criterion", "a thinking budget over max_tokens"],
)
def test_a_case_reserves_what_each_of_its_requests_may_cost(
    tmp_path: Path, judges: str, model: str, price: tuple[float, float], requests: int
) -> None:
    style = "anthropic" if model.startswith("anthropic") else "openai"
    server = next(servers := serve(style))
    try:
        reserved = reserved_by_a_batch(tmp_path, server, judges, model)
    finally:
        servers.close()
    assert len(server.received) == 3 * requests
    expected = sum(request_ceiling_usd(request, price) for request in server.received)
    assert reserved == pytest.approx(expected, rel=1e-3)
    if style == "anthropic":
        assert server.received[0].body["max_tokens"] > 1024  # the thinking budget


def reserved_by_a_batch(tmp_path: Path, server: FakeLLM, judges: str, model: str) -> float:
    """What a batch of three cases under a large budget reserved."""

    def answer(received: Received) -> Any:
        tools = received.body["tools"][0]
        schema = tools["function"]["parameters"] if "function" in tools else tools["input_schema"]
        asked = schema["properties"].get("criteria", {}).get("properties", {})
        verdicts = {
            name: {"rationale": "r", "score": 4 if name == "clarity" else True} for name in asked
        }
        return server.grade(criteria=verdicts) if asked else server.grade(score=4)

    server.route = answer
    command = batch_command(tmp_path, 3, model)
    (tmp_path / "eval.yaml").write_text(judges.replace("MODEL", model))
    completed = subprocess.run(
        [*command, "--max-cost-usd", "5"],
        capture_output=True,
        text=True,
        env=client_environment(server),
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    summary = json.loads(summary_paths(tmp_path / "out", None)[0].read_text())
    return float(summary["budget"]["reserved_usd"])
