"""`task init --protect`: the trusted copies of the agent's tests, guarded by construction."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifier.errors import UsageError
from verifier.grading import grade, load_eval
from verifier.task import InitRequest, init_task

GUARDED = """\
judges:
  - name: tests_intact
    builtin: guard/files_unchanged
    arguments: {paths: ['tests/**', conftest.py], reference: protected}
  - name: answer
    check: return outputs["files"].get("answer.txt", "").strip() == "42"
"""
AGENT_FILES = {
    "answer.txt": "41\n",
    "tests/test_answer.py": "def test_answer():\n    assert open('answer.txt').read() == '42\\n'\n",
    "tests/data/cases.json": "[42]",
    "src/app.py": "ANSWER = 41\n",
}


def make_source(tmp_path: Path, eval_yaml: str = GUARDED) -> Path:
    source = tmp_path / "source"
    (source / "protected").mkdir(parents=True)  # what the author keeps beside eval.yaml
    (source / "protected" / "stale.py").write_text("an old copy\n")
    (source / "eval.yaml").write_text(eval_yaml)
    return source / "eval.yaml"


def make_environment(dest: Path) -> None:
    for relative, text in AGENT_FILES.items():
        (dest / "environment" / relative).parent.mkdir(parents=True, exist_ok=True)
        (dest / "environment" / relative).write_text(text)


def test_protect_copies_the_agents_tests_into_tests_protected(tmp_path: Path) -> None:
    dest = tmp_path / "task"
    make_environment(dest)
    init_task(InitRequest(dest, make_source(tmp_path), protect=("tests/**",), force=True))
    protected = dest / "tests" / "protected"
    found = sorted(
        str(path.relative_to(protected)) for path in protected.rglob("*") if path.is_file()
    )
    assert found == ["tests/data/cases.json", "tests/test_answer.py"]  # not the stale copy
    dockerfile = (dest / "environment" / "Dockerfile").read_text()
    assert 'COPY ["tests", "/app/tests"]' in dockerfile


def test_the_packaged_guard_passes_the_untouched_tests_and_fails_edited_ones(
    tmp_path: Path, make_case
) -> None:
    dest = tmp_path / "task"
    make_environment(dest)
    init_task(InitRequest(dest, make_source(tmp_path), protect=("tests/**",), force=True))
    loaded = load_eval(dest / "tests" / "eval.yaml")
    honest = make_case({**AGENT_FILES, "answer.txt": "42\n"}, name="honest")
    assert grade(loaded, honest).reward == 1.0
    cheat = make_case(
        {**AGENT_FILES, "tests/test_answer.py": "def test_answer():\n    pass\n"}, name="cheat"
    )
    graded = grade(loaded, cheat)
    assert graded.reward == 0.0
    assert graded.results[0].rationale == (
        "protected files were tampered with: changed: tests/test_answer.py"
    )


def test_a_glob_that_matches_nothing_is_a_usage_error_before_anything_is_written(
    tmp_path: Path,
) -> None:
    dest = tmp_path / "task"
    make_environment(dest)
    with pytest.raises(UsageError, match="--protect test/\\*\\*: matches no file"):
        init_task(InitRequest(dest, make_source(tmp_path), protect=("test/**",), force=True))
    assert not (dest / "tests").exists()


def test_protect_without_a_guard_judge_says_what_to_add(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "task"
    make_environment(dest)
    source = make_source(tmp_path, "judges:\n  - {name: answer, check: return True}\n")
    init_task(InitRequest(dest, source, protect=("tests/**",), force=True))
    assert "--protect filled tests/protected/, but no judge reads it" in capsys.readouterr().err
