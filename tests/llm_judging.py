"""What the LLM judge tests share: fast VERIFIER_LLM_* settings, a clean environment
(`set_llm_env`), and `judge_maker`, which loads one judge from eval.yaml text exactly
as `verifier grade` does and returns the call grading a case in this process (against
the local servers of tests/llm_servers.py), so a failure is the LLMJudgeError itself.
tests/unit/conftest.py makes fixtures of them (`llm_env`, `judge_of`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.llm_servers import FakeLLM
from verifier.case import read_case
from verifier.grading import load_eval
from verifier.judges.base import JudgeContext

FAST = {
    "VERIFIER_LLM_REQUEST_TIMEOUT": "2",
    "VERIFIER_LLM_BACKOFF": "0.01",
    "VERIFIER_LLM_MAX_WAIT": "0.3",
}
KEY = "sk-unit-test-0123456789abcdefghijklmnop"


def set_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    for name in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "EVAL_JUDGE_MODEL",
        "VERIFIER_LLM_RETRIES",
        "VERIFIER_LLM_TEMPERATURE",
        "VERIFIER_LLM_OUTPUT",
        "VERIFIER_LLM_MAX_CASE_CHARS",
        "VERIFIER_LLM_PRICES",
        "VERIFIER_LLM_CONTEXT_TOKENS",
        "http_proxy",
        "https_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)


def model_for(server: FakeLLM) -> str:
    return f"{server.style}/judge-model"


def judge_maker(
    write_config: Callable[..., Path],
    make_case: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[..., Callable[[], Any]]:
    """judge_of(server, judge_yaml, files=...) -> a no-argument call grading the case."""
    counter = iter(range(1000))

    def build(
        server: FakeLLM | None, judge: str, files: dict[str, str] | None = None, top: str = ""
    ) -> Callable[[], Any]:
        for name, value in (server.env if server is not None else {}).items():
            monkeypatch.setenv(name, value)
        config = write_config(
            f"name: t\n{top}outputs:\n  - path: report.md\njudges:\n"
            + "\n".join("  " + line for line in judge.strip().splitlines())
            + "\n",
            name=f"eval{next(counter)}.yaml",
        )
        loaded = load_eval(config)
        case = make_case(files or {"report.md": "The bug is fixed.\n"}, name=f"case{next(counter)}")
        record = read_case(case, loaded.config.outputs, loaded.config.annotations).record
        return functools.partial(loaded.judges[0].call, JudgeContext(record))

    return build
