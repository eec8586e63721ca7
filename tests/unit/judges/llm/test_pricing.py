"""What LLM judges cost: the price table and its overrides, `cost_usd` in judges.json,
the batch summary's totals, and `--max-cost-usd` stopping a real batch against a local
server once its budget is spent."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import attrs
import pytest

from tests.llm_servers import FakeLLM, Received, Reply, client_environment
from verifier.batch import summary_paths
from verifier.errors import EXIT_BUDGET, EXIT_CONFIG, ConfigError
from verifier.grading import load_eval
from verifier.judges.llm.pricing import DEFAULT_PRICES, find_price

pytestmark = pytest.mark.usefixtures("llm_env")
VERIFIER = str(Path(sys.executable).with_name("verifier"))
# The servers answer with 321 input and 12 output tokens.
TOKENS = (321, 12)


def usd(input_price: float, output_price: float, requests: int = 1) -> float:
    return requests * (TOKENS[0] * input_price + TOKENS[1] * output_price) / 1_000_000


def judge(model: str, extra: str = "") -> str:
    return f"- name: q\n  llm_rubric: ok?\n  score_range: [1, 5]\n  model: {model}\n{extra}"


@pytest.mark.parametrize(
    ("style", "model", "price"),
    [
        ("openai", "openai/gpt-4o-mini", (0.15, 0.60)),
        ("openai", "openai/gpt-4o-mini-2024-07-18", (0.15, 0.60)),
        ("anthropic", "anthropic/claude-sonnet-4-5-20250929", (3.0, 15.0)),
        ("anthropic", "claude-haiku-4-5", (1.0, 5.0)),
    ],
)
def test_cost_from_the_default_prices(
    judge_of, style: str, model: str, price: tuple[float, float]
) -> None:
    server = FakeLLM(style).start()  # type: ignore[arg-type]
    try:
        server.queue(server.grade(score=4))
        verdict = judge_of(server, judge(model))()
    finally:
        server.stop()
    assert verdict.details["cost_usd"] == pytest.approx(usd(*price))
    assert "cost_note" not in verdict.details


def test_a_model_without_a_price_costs_null_not_zero(openai_server: FakeLLM, judge_of) -> None:
    openai_server.queue(openai_server.grade(score=4))
    verdict = judge_of(openai_server, judge("openai/Qwen2.5-72B-Instruct"))()
    assert verdict.details["cost_usd"] is None
    assert "no price for model Qwen2.5-72B-Instruct" in verdict.details["cost_note"]


def test_prices_in_eval_yaml_a_file_and_the_environment(
    openai_server: FakeLLM,
    judge_of,
    write_config,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    openai_server.default = openai_server.grade(score=4)
    inline = judge("openai/qwen", "  prices: {qwen: {input: 0.5, output: 1.5}}\n")
    assert judge_of(openai_server, inline)().details["cost_usd"] == pytest.approx(usd(0.5, 1.5))
    env_file = tmp_path / "prices.yaml"
    env_file.write_text("qwen: {input: 2, output: 4}\ngpt-4o: {input: 1, output: 1}\n")
    monkeypatch.setenv("VERIFIER_LLM_PRICES", str(env_file))
    from_env = judge_of(openai_server, judge("openai/qwen"))().details["cost_usd"]
    assert from_env == pytest.approx(usd(2, 4))
    over_default = judge_of(openai_server, judge("openai/gpt-4o"))().details["cost_usd"]
    assert over_default == pytest.approx(usd(1, 1))  # the file wins over the defaults
    assert judge_of(openai_server, inline)().details["cost_usd"] == pytest.approx(usd(0.5, 1.5))
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config" / "judge-prices.json").write_text('{"qwen": {"input": 3, "output": 3}}')
    from_file = judge("openai/qwen", "  prices: judge-prices.json\n")
    assert judge_of(openai_server, from_file)().details["cost_usd"] == pytest.approx(usd(3, 3))


def test_answers_from_the_cache_cost_nothing(
    openai_server: FakeLLM, judge_of, tmp_path: Path
) -> None:
    from verifier.judges.llm.cache import ResponseCache

    openai_server.default = openai_server.grade(score=4)
    call = judge_of(openai_server, judge("openai/gpt-4o"))
    cache = ResponseCache(tmp_path / "cache", 1 << 20)
    cached_call = type(call)(attrs.evolve(call.func, cache=cache), *call.args)
    assert cached_call().details["cost_usd"] == pytest.approx(usd(2.5, 10))
    again = cached_call().details
    assert again["cached"] is True and again["cost_usd"] == 0.0


def test_a_panel_costs_what_its_members_cost(openai_server: FakeLLM, judge_of) -> None:
    openai_server.default = openai_server.grade(score=4)
    panel = "- name: q\n  llm_rubric: ok?\n  panel: [openai/gpt-4o, openai/gpt-4o-mini]\n"
    verdict = judge_of(openai_server, panel)()
    assert verdict.details["cost_usd"] == pytest.approx(usd(2.5, 10) + usd(0.15, 0.6))
    unpriced = judge_of(openai_server, panel.replace("gpt-4o-mini", "qwen"))()
    assert unpriced.details["cost_usd"] is None
    assert unpriced.details["panel"][0]["cost_usd"] == pytest.approx(usd(2.5, 10))


@pytest.mark.parametrize(
    ("prices", "problem"),
    [
        ("{qwen: {input: -1, output: 1}}", "prices.qwen.input: -1 must be a number >= 0"),
        ("{qwen: {input: 1}}", "prices.qwen: must be {input: USD, output: USD}"),
        ("[1, 2]", "prices: must map model names"),
        ("missing.yaml", "not found"),
    ],
)
def test_price_mistakes_are_load_errors(write_config, prices: str, problem: str) -> None:
    text = (
        f"name: t\njudges:\n  - name: q\n    llm_rubric: ok?\n    model: m\n    prices: {prices}\n"
    )
    with pytest.raises(ConfigError, match=problem.replace("{", r"\{").replace("}", r"\}")):
        load_eval(write_config(text))


def test_a_price_is_found_by_the_model_name_or_a_snapshot_of_it() -> None:
    tables = [("default", DEFAULT_PRICES)]
    assert find_price("gpt-4o-2024-08-06", tables).input == 2.5
    assert find_price("claude-opus-4-5-20251101", tables).output == 25.0
    assert find_price("claude-opus-4-20250514", tables).output == 75.0
    assert find_price("claude-3-5-sonnet-latest", tables).input == 3.0
    assert find_price("gpt-5-pro", tables) is None  # not gpt-5's price
    assert find_price("o3-pro", tables) is None
    assert find_price("openai/gpt-oss-20b", tables) is None


# --- the batch -----------------------------------------------------------------------


def batch_command(tmp_path: Path, cases: int, model: str = "openai/gpt-4o") -> list[str]:
    """`verifier batch` over cases that tmp_path/cases holds (made when missing: a rerun
    finds them unchanged and its resume skips them), into tmp_path/out, -j 2, no cache."""
    root = tmp_path / "cases"
    for index in range(cases):
        report = root / f"case-{index:03d}" / "report.md"
        if not report.exists():
            report.parent.mkdir(parents=True, exist_ok=True)
            report.write_text(f"report {index}")
    (tmp_path / "eval.yaml").write_text(
        textwrap.dedent(f"""
        name: costed
        outputs: [report.md]
        judges:
          - name: q
            llm_rubric: ok?
            score_range: [1, 5]
            model: {model}
        """)
    )
    return [
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
    ]


def run_batch(
    tmp_path: Path,
    server: FakeLLM,
    cases: int,
    *args: str,
    model: str = "openai/gpt-4o",
    env: Mapping[str, str] = MappingProxyType({}),
) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    completed = subprocess.run(
        [*batch_command(tmp_path, cases, model), *args],
        capture_output=True,
        text=True,
        env={**client_environment(server), **env},
        timeout=120,
    )
    path = summary_paths(tmp_path / "out", None)[0]
    return completed, json.loads(path.read_text()) if path.exists() else None


def test_the_summary_totals_the_cost(tmp_path: Path, openai_server: FakeLLM) -> None:
    openai_server.default = openai_server.grade(score=4)
    completed, summary = run_batch(tmp_path, openai_server, 6)
    assert completed.returncode == 0, completed.stderr
    cost = summary["llm"]["cost_usd"]
    assert cost["total"] == pytest.approx(usd(2.5, 10, 6))
    assert cost["by_model"] == {"gpt-4o": pytest.approx(usd(2.5, 10, 6))}
    assert cost["unpriced_models"] == [] and summary["budget"] is None
    assert summary["cases"][0]["cost_usd"] == pytest.approx(usd(2.5, 10))
    assert f"cost_usd={usd(2.5, 10, 6):.4f}" in completed.stdout


@pytest.mark.slow
def test_max_cost_usd_stops_the_batch_and_a_rerun_resumes_the_rest(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    """Each case costs 0.0009225 USD and reserves about 0.005 (its prompt's bytes as
    tokens, and max_tokens 64): a budget of 0.01 funds one at a time, six in all
    (tests/unit/batch/test_budget.py measures the reservation itself)."""
    openai_server.default = openai_server.grade(score=4)._replace(delay_s=0.2)
    small = {"VERIFIER_LLM_MAX_TOKENS": "64"}
    completed, summary = run_batch(
        tmp_path, openai_server, 60, "--max-cost-usd", "0.01", "--llm-concurrency", "2", env=small
    )
    assert completed.returncode == EXIT_BUDGET, completed.stderr
    budget = summary["budget"]
    graded = summary["graded"]
    assert graded == 6 and budget["exhausted"] is True
    assert 1 <= budget["refused_cases"] <= 2  # the cases begun then, one a worker
    assert budget["cases_not_started"] == 60 - graded - budget["refused_cases"]
    assert budget["spent_usd"] == pytest.approx(usd(2.5, 10, graded), abs=1e-6)
    assert budget["spent_usd"] <= 0.01
    assert len(openai_server.received) == graded
    assert f"BUDGET SPENT ({budget['spent_usd']:.4f} of 0.01 USD): {60 - graded} cases" in (
        completed.stdout
    )
    rewarded = [path.parent.name for path in (tmp_path / "out").glob("case-*/reward.json")]
    assert len(rewarded) == graded == len(summary["cases"])  # no row, no reward when refused
    again, resumed = run_batch(tmp_path, openai_server, 60, "--max-cost-usd", "1", env=small)
    assert again.returncode == 0 and resumed["resumed"] == graded
    assert resumed["graded"] == 60 - graded and resumed["budget"]["exhausted"] is False


def test_a_budget_with_an_unpriced_model_is_refused(tmp_path: Path, openai_server: FakeLLM) -> None:
    completed, summary = run_batch(
        tmp_path, openai_server, 2, "--max-cost-usd", "1", model="openai/qwen"
    )
    assert completed.returncode == EXIT_CONFIG and summary is None
    assert "--max-cost-usd: no price for model qwen" in completed.stderr
    assert openai_server.received == []


def test_unpriced_models_are_named_in_the_summary(tmp_path: Path, openai_server: FakeLLM) -> None:
    def route(request: Received) -> Reply:
        return openai_server.grade(score=3)

    openai_server.route = route
    completed, summary = run_batch(tmp_path, openai_server, 2, model="openai/qwen")
    assert completed.returncode == 0
    assert summary["llm"]["cost_usd"] == {
        "total": None,
        "by_model": {},
        "unpriced_models": ["qwen"],
    }
    assert "cost_usd=unknown" in completed.stdout


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "cheap"])
def test_a_budget_that_is_not_a_positive_number_is_a_usage_error(
    tmp_path: Path, openai_server: FakeLLM, value: str
) -> None:
    completed, summary = run_batch(tmp_path, openai_server, 1, "--max-cost-usd", value)
    assert completed.returncode == EXIT_CONFIG and summary is None
    assert f"--max-cost-usd: {value}" in completed.stderr or "is not a number" in completed.stderr


def test_a_prices_file_travels_with_the_config(tmp_path: Path) -> None:
    """A task package copies it and the resume key hashes it, like a prompt_file."""
    from verifier.judges.builtins import builtin_reference_files
    from verifier.references import referenced_files

    (tmp_path / "prices.yaml").write_text("qwen: {input: 1, output: 1}\n")
    (tmp_path / "eval.yaml").write_text(
        "judges:\n  - {name: q, llm_rubric: ok, model: openai/qwen, prices: prices.yaml}\n"
    )
    files = referenced_files(tmp_path / "eval.yaml", builtin_reference_files)
    assert [str(path) for path in files] == ["prices.yaml"]
