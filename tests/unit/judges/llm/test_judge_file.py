"""`judge_file:` what of a rewardkit judge TOML does not move, each a one-line error naming
the file, its key and the fix (exit 2 from `verifier check`); what the TOML names beside
itself is part of the config (task init copies it, a batch's resume key hashes it). That
the files that do move grade as rewardkit grades them: test_rewardkit_judge_files.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from verifier.errors import ConfigError
from verifier.grading import load_eval
from verifier.references import referenced_files

VERIFIER = str(Path(sys.executable).with_name("verifier"))
CRITERION = '\n[[criterion]]\ndescription = "Is it correct?"\n'
JUDGE = '[judge]\njudge = "openai/gpt-4o"\n'


def config(tmp_path: Path, toml: str, entry: str = "", name: str = "quality.toml") -> Path:
    (tmp_path / name).write_text(toml)
    path = tmp_path / "eval.yaml"
    path.write_text(f"judges:\n  - {{name: quality, judge_file: {name}{entry}}}\n")
    return path


def problem(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_eval(path)
    return str(caught.value)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            '[judge]\njudge = "claude-code"\nisolated = true\n' + CRITERION,
            "quality.toml: judge.isolated: is read by rewardkit's agent judges only; "
            "this judge is an LLM: remove isolated",
        ),
        (
            '[judge]\njudge = "claude-code"\n' + CRITERION,
            "quality.toml: judge.judge: an agent judge (claude-code) does not move: the "
            "verifier asks LLMs only; give judge an LLM (provider/model)",
        ),
        (
            '[judge]\njudge = "jev"\n' + CRITERION,
            "quality.toml: judge.judge: the jev judge does not move",
        ),
        (
            JUDGE + 'model = "openai/gpt-4o-mini"\n' + CRITERION,
            "quality.toml: judge.model: is read by rewardkit's agent judges only",
        ),
        (
            JUDGE + "weight = 2.0\n" + CRITERION,
            "quality.toml: judge.weight: 2.0: a judge's weight in the reward is eval.yaml's "
            "`reward: {weights: {NAME: W}}`; remove it here",
        ),
        (
            JUDGE + CRITERION + 'files = ["/app/a.py"]\n',
            "quality.toml: criterion[0].files: per-criterion files are not read",
        ),
        (
            JUDGE + "reasoning = 'high'\n" + CRITERION,
            "quality.toml: judge.reasoning: unknown judge key (did you mean 'reasoning_effort'?)",
        ),
        (
            JUDGE + 'reasoning_effort = "extreme"\n' + CRITERION,
            "quality.toml: judge.reasoning_effort: 'extreme' must be none, minimal, low, "
            "medium, high, xhigh or max",
        ),
        (
            JUDGE + 'mode = "parallel"\n' + CRITERION,
            "quality.toml: judge.mode: 'parallel' must be batched or individual",
        ),
        (
            JUDGE + 'files = ["/workspace/a.py"]\n' + CRITERION,
            "quality.toml: judge.files[0]: '/workspace/a.py' is outside /app, rewardkit's "
            "workspace (the case here): give it relative to the case",
        ),
        (
            JUDGE + 'reference = "/etc/passwd"\n' + CRITERION,
            "quality.toml: judge.reference: '/etc/passwd' is outside eval.yaml's dir and "
            "/tests: give it beside quality.toml",
        ),
        (
            JUDGE + 'prompt_template = "rubric.html"\n' + CRITERION,
            "quality.toml: judge.prompt_template: 'rubric.html' must be a .txt or .md file",
        ),
        (
            JUDGE + CRITERION + "\n[scoring]\nthreshold = 0.7\n",
            'quality.toml: scoring.threshold: is read only with aggregation = "threshold"',
        ),
        (
            JUDGE + CRITERION + '\n[scoring]\naggregation = "weighted-sum"\n',
            "quality.toml: scoring.aggregation: weighted-sum is not supported",
        ),
        (
            JUDGE + CRITERION + "\n[[reward]]\nname = 'x'\n",
            "quality.toml: reward: unknown table",
        ),
        (JUDGE, "quality.toml: criterion: is missing: list the judge's [[criterion]] tables"),
        (
            JUDGE + '[[criterion]]\ndescription = "x"\ntype = "likert"\npoints = 1\n',
            "quality.toml: criterion[0].points: 1 must be a finite number >= 2 and <= 100",
        ),
    ],
)
def test_what_does_not_move_is_a_one_line_error(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "rubric.html").write_text("{criteria}")
    found = problem(config(tmp_path, toml))
    assert message in found and "\n" not in found
    assert found.startswith(str(tmp_path / "quality.toml"))


def test_a_reward_toml_is_the_reward_block_not_a_judge(tmp_path: Path) -> None:
    toml = '[[reward]]\nname = "reward"\nweights = { checks = 2.0 }\n'
    assert problem(config(tmp_path, toml, name="reward.toml")).endswith(
        "reward.toml: is no judge file: rewardkit's reward aggregation: write its [[reward]] "
        "weights as eval.yaml's reward block"
    )


@pytest.mark.parametrize(
    ("toml", "entry", "message"),
    [
        (JUDGE + CRITERION, ", model: openai/gpt-4o", "quality).model: is set by quality.toml"),
        (JUDGE + "timeout = 30\n" + CRITERION, ", timeout: 40", "quality).timeout: is set by"),
        (JUDGE + CRITERION, ", criteria: [{description: x}]", "quality).criteria: is set by"),
    ],
)
def test_a_key_in_the_entry_and_its_file_is_an_error(
    tmp_path: Path, toml: str, entry: str, message: str
) -> None:
    assert message in problem(config(tmp_path, toml, entry))


def test_the_file_must_be_toml_beside_eval_yaml(tmp_path: Path) -> None:
    assert "is not a .toml file" in problem(config(tmp_path, JUDGE + CRITERION, name="q.yaml"))
    broken = problem(config(tmp_path, "[judge\n"))
    assert "quality.toml cannot be read as TOML" in broken and "\n" not in broken
    outside = tmp_path / "eval.yaml"
    outside.write_text("judges:\n  - {name: quality, judge_file: ../quality.toml}\n")
    assert "without '..'" in problem(outside)


def test_an_entry_adds_keys_the_file_does_not_set(tmp_path: Path) -> None:
    """The file's judge, with the entry's provider and context around it; the TOML's
    timeout is the judge's."""
    (tmp_path / "guide.md").write_text("Be strict.\n")
    toml = JUDGE + "timeout = 45\n" + CRITERION
    loaded = load_eval(config(tmp_path, toml, ", provider: openai, context: guide.md"))
    judge = loaded.config.judges[0]
    assert judge.timeout_s == 45.0
    assert judge.spec.provider == "openai" and [str(p) for p in judge.spec.context] == ["guide.md"]
    assert judge.spec.judge_file == Path("quality.toml")


def test_verifier_check_reports_it_in_one_line_with_exit_2(tmp_path: Path) -> None:
    path = config(tmp_path, '[judge]\njudge = "codex"\n' + CRITERION)
    checked = subprocess.run(
        [VERIFIER, "check", str(path)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 2
    assert "quality.toml: judge.judge: an agent judge (codex) does not move" in checked.stdout


def test_what_the_file_names_is_part_of_the_config(tmp_path: Path) -> None:
    """task init copies it and a batch's resume key hashes it: the TOML, its reference
    (beside it, or under /tests as Harbor has it) and its prompt template."""
    (tmp_path / "judges").mkdir()
    (tmp_path / "judges" / "rubric.md").write_text("Grade: {criteria}\n")
    (tmp_path / "solution").mkdir()
    (tmp_path / "solution" / "calc.py").write_text("def add(a, b): return a + b\n")
    toml = JUDGE + 'reference = "/tests/solution"\nprompt_template = "rubric.md"\n' + CRITERION
    path = config(tmp_path, toml, name="judges/quality.toml")
    load_eval(path)
    assert [str(p) for p in referenced_files(path, lambda name, arguments: [])] == [
        "judges/quality.toml",
        "judges/rubric.md",
        "solution",
    ]
