"""Shared builders: eval.yaml files and case dirs in tmp_path, judge results by value."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.llm_judging import judge_maker, set_llm_env
from tests.llm_servers import FakeLLM, serve
from verifier.config import EvalConfig
from verifier.grading import load_eval
from verifier.results import JudgeResult, Status
from verifier.sandbox import Sandbox, discard_policy, plan_policy


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    """A sandbox for builtins run by hand (a grade plans its own), hiding nothing of the
    tests but the secret mounts and its own scratch."""
    policy = plan_policy()
    yield Sandbox(policy)
    discard_policy(policy)


@pytest.fixture
def openai_server() -> Iterator[FakeLLM]:
    """A local server speaking the OpenAI chat completions wire format."""
    yield from serve("openai")


@pytest.fixture(params=["openai", "anthropic"])
def llm_server(request: pytest.FixtureRequest) -> Iterator[FakeLLM]:
    """Each test that takes it runs against both wire formats."""
    yield from serve(request.param)


@pytest.fixture
def llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fast LLM retries and timeouts; no key, model or proxy from this environment."""
    set_llm_env(monkeypatch)


@pytest.fixture
def judge_of(
    write_config: Callable[..., Path],
    make_case: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[..., Callable[[], Any]]:
    """judge_of(server, judge_yaml, files=...) -> a no-argument call grading the case."""
    return judge_maker(write_config, make_case, monkeypatch)


@pytest.fixture
def root_dir() -> Iterator[Path]:
    """A fresh dir under /tmp every UID can enter, for graders run as another UID (pytest's
    own tmp dirs are root's alone); removed after the test, with whatever a test mounted
    beneath it and whatever modes an attack left."""
    from tests.hostile import remove_world_dir
    from tests.toolchain import world_dir

    path = world_dir("verifier-hostile-")
    yield path
    remove_world_dir(path)


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[str], Path]:
    """Write an eval.yaml (dedented) under tmp_path/config and return its path."""

    def write(text: str, name: str = "eval.yaml") -> Path:
        directory = tmp_path / "config"
        directory.mkdir(exist_ok=True)
        path = directory / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture
def load(write_config: Callable[[str], Path]) -> Callable[[str], EvalConfig]:
    return lambda text: load_eval(write_config(text)).config


@pytest.fixture
def make_case(tmp_path: Path) -> Callable[[dict[str, str | bytes]], Path]:
    """A case dir holding the given files (relative path -> text or bytes)."""

    def make(files: dict[str, str | bytes], name: str = "case") -> Path:
        case = tmp_path / name
        case.mkdir()
        write_files(case, files)
        return case

    return make


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    """Each file (relative path -> text or bytes) under root, with its parent dirs."""
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def results(**values: bool | float | str | None) -> list[JudgeResult]:
    """JudgeResults by name: a value is ok, None is an error, "skipped" is skipped."""
    made = []
    for name, value in values.items():
        if value is None:
            made.append(JudgeResult(name, "check", Status.ERROR, error="boom"))
        elif value == "skipped":
            made.append(JudgeResult(name, "check", Status.SKIPPED))
        else:
            made.append(JudgeResult(name, "check", Status.OK, value=value))
    return made
