"""`--reward-keys native`: reward.json holds the reward and the keys the task's own test.sh
wrote (a `tests/script` judge's reward file), never claiming more than the reward gave.

The rule alone (native_keys, reward_json on graded records), then `verifier grade` end to
end on real case dirs with the task's script run in the sandbox, honest and hostile.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType

import pytest

from verifier.grading import check_reward_keys, load_eval
from verifier.judges.builtins import find_builtin
from verifier.output import native_keys, reward_json
from verifier.parsers import NATIVE_REWARD_KEYS, RewardKeys, RewardKeysKind, parse_reward_keys
from verifier.results import SCRIPT_BUILTIN, Composition, Grading, JudgeResult, Status

VERIFIER = str(Path(sys.executable).with_name("verifier"))
WRITTEN = {"accuracy": 0.5, "style": 1.0}  # the script's value: their mean, 0.75


@pytest.mark.parametrize(
    ("written", "value", "reward", "keys"),
    [
        # Nothing lowered the reward: the keys as the script wrote them.
        (WRITTEN, 0.75, 0.75, WRITTEN),
        # A gate failed: the reward is 0, and so is every key.
        (WRITTEN, 0.75, 0.0, {"accuracy": 0.0, "style": 0.0}),
        # Another judge pulled the reward to half the script's value: each key halved.
        (WRITTEN, 0.75, 0.375, {"accuracy": 0.25, "style": 0.5}),
        # Another judge raised the reward above the script's value: the keys as written.
        (WRITTEN, 0.75, 1.0, WRITTEN),
        # The judge did not credit the file (the script timed out, ...): each key 0.
        (WRITTEN, None, 0.0, {"accuracy": 0.0, "style": 0.0}),
        # The script's own `reward` key is not a native key: reward.json's is the reward.
        ({"reward": 1.0, "tests": 3.0}, 1.0, 1.0, {"tests": 3.0}),
        ({"reward": 0.8, "tests": 4.0}, 0.8, 0.4, {"tests": 2.0}),
        # A negative number is never raised by the scaling.
        ({"reward": 1.0, "penalty": -2.0}, 1.0, 0.0, {"penalty": -2.0}),
        # A script's value of 0 lowers nothing: its keys as written.
        ({"reward": 0.0, "tests": 0.0}, 0.0, 0.0, {"tests": 0.0}),
        ({}, None, 0.0, {}),
    ],
)
def test_native_keys_never_claim_more_than_the_reward(written, value, reward, keys) -> None:  # type: ignore[no-untyped-def]
    assert native_keys(written, value, reward) == keys


def test_a_gate_failed_writes_zero_not_minus_zero() -> None:
    keys = native_keys({"a": -0.0, "b": 0.5}, 0.5, 0.0)
    assert json.dumps(keys) == '{"a": 0.0, "b": 0.0}'


def script_result(status: Status, value: float | None, **details: object) -> JudgeResult:
    return JudgeResult("script", "builtin", status, value, details=MappingProxyType(details))


def graded(reward: float, *results: JudgeResult) -> Grading:
    composition = Composition(reward, "judge", False, (), {})
    return Grading("t", results, composition)


def test_reward_json_native_holds_the_reward_then_the_scripts_keys() -> None:
    script = script_result(Status.OK, 0.75, rewards=WRITTEN, credited=True)
    other = JudgeResult("other", "check", Status.OK, 0.2)
    assert reward_json(graded(0.75, script, other), NATIVE_REWARD_KEYS) == {
        "reward": 0.75,
        **WRITTEN,
    }
    assert list(reward_json(graded(0.75, script), NATIVE_REWARD_KEYS)) == [
        "reward",
        "accuracy",
        "style",
    ]


@pytest.mark.parametrize(
    "script",
    [
        # The judge errored (its builtin raised): no reward file was read, no keys.
        JudgeResult("script", "builtin", Status.ERROR, error="boom"),
        JudgeResult("script", "builtin", Status.TIMEOUT, error="timed out"),
        JudgeResult("script", "builtin", Status.SKIPPED),
        # The script wrote nothing usable (or a planted file): no numbers, no keys.
        script_result(Status.OK, 0.0, rewards={}, credited=False),
        # A module judge's details that look like it are not the task's script.
        JudgeResult(
            "script", "module", Status.OK, 1.0, details={"rewards": {"x": 1.0}, "credited": True}
        ),
    ],
)
def test_no_reward_file_read_is_the_reward_alone(script: JudgeResult) -> None:
    assert reward_json(graded(0.0, script), NATIVE_REWARD_KEYS) == {"reward": 0.0}


def test_a_timed_out_script_writes_its_keys_as_zero() -> None:
    script = script_result(Status.OK, 0.0, rewards={"reward": 1.0, "tests": 9.0}, credited=False)
    assert reward_json(graded(0.0, script), NATIVE_REWARD_KEYS) == {"reward": 0.0, "tests": 0.0}


def test_native_is_a_word_of_its_own() -> None:
    assert parse_reward_keys("native") == NATIVE_REWARD_KEYS
    assert parse_reward_keys(" native ") == NATIVE_REWARD_KEYS
    with pytest.raises(ValueError, match="native"):
        parse_reward_keys("native,accuracy")
    assert parse_reward_keys("reward") == RewardKeys(RewardKeysKind.NAMED, ())
    assert str(parse_reward_keys("reward")) == "reward"
    assert str(parse_reward_keys("b,a")) == "b,a"


# --- verifier grade end to end: the task's script run in the sandbox ----------------------
# The script's paths are dirs every Linux image has (the sandbox shows a view only where the
# image has a dir): /srv the case, /mnt the tests, /media the stand-in for /logs/verifier.

EVAL = """\
name: multi-key
judges:
  - name: script
    builtin: tests/script
    arguments:
      tests: task-tests
      tests_at: /mnt
      case_at: /srv
      logs_at: /media
      reward_files: [{reward_files}]
      timeout: {timeout}
{more}reward: {{judge: script, on_error: fail{gate}}}
"""
MULTI_KEY = """\
#!/bin/bash
bash /srv/solve.sh
echo '{"accuracy": 0.5, "style": 1.0}' > /media/reward.json
"""
ONE_VALUE = """\
#!/bin/bash
bash /srv/solve.sh
echo 1 > /media/reward.txt
"""
EVIL = '{"reward": 1, "accuracy": 1, "style": 1, "bonus": 1}'


def grade(
    tmp_path: Path,
    test_sh: str,
    solve_sh: str = "true\n",
    *,
    reward_files: str = "reward.json",
    more: str = "",
    gate: str = "",
    keys: str = "native",
    timeout: int = 20,
) -> tuple[subprocess.CompletedProcess[str], dict[str, float] | None, dict]:
    config = tmp_path / "tests" / "eval.yaml"
    (tmp_path / "tests" / "task-tests").mkdir(parents=True)
    (tmp_path / "tests" / "task-tests" / "test.sh").write_text(test_sh)
    config.write_text(EVAL.format(reward_files=reward_files, more=more, gate=gate, timeout=timeout))
    case = tmp_path / "case"
    case.mkdir()
    (case / "solve.sh").write_text(solve_sh)
    out = tmp_path / "out"
    completed = subprocess.run(
        [
            VERIFIER,
            "grade",
            "--config",
            str(config),
            "--case",
            str(case),
            "--out",
            str(out),
            "--reward-keys",
            keys,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    rewards = json.loads((out / "reward.json").read_text()) if completed.returncode == 0 else None
    judges = json.loads((out / "judges.json").read_text()) if completed.returncode == 0 else {}
    return completed, rewards, judges


def test_a_multi_key_script_gives_reward_json_its_keys(tmp_path: Path) -> None:
    completed, rewards, judges = grade(tmp_path, MULTI_KEY)
    assert completed.returncode == 0, completed.stderr
    assert rewards == {"reward": 0.75, "accuracy": 0.5, "style": 1.0}
    # The judge's detail is judges.json's.
    assert judges["per_judge"]["script"]["rewards"] == {"accuracy": 0.5, "style": 1.0}


def test_a_one_value_script_gives_reward_json_the_reward_alone(tmp_path: Path) -> None:
    completed, rewards, _ = grade(tmp_path, ONE_VALUE, reward_files="reward.txt")
    assert completed.returncode == 0, completed.stderr
    assert rewards == {"reward": 1.0}


def test_a_failed_gate_zeroes_every_native_key(tmp_path: Path) -> None:
    more = "  - name: ok\n    check: 'return False'\n"
    completed, rewards, _ = grade(tmp_path, MULTI_KEY, more=more, gate=", gate: true")
    assert completed.returncode == 0, completed.stderr
    assert rewards == {"reward": 0.0, "accuracy": 0.0, "style": 0.0}


def test_a_script_that_times_out_after_writing_its_keys_gets_them_as_zero(
    tmp_path: Path,
) -> None:
    """The script wrote its keys, then the code under test hung past the script's time:
    the judge is 0, and so is each key it wrote (Harbor would have read no reward)."""
    hang = MULTI_KEY.replace("bash /srv/solve.sh\n", "") + "sleep 30\n"
    completed, rewards, judges = grade(tmp_path, hang, timeout=2)
    assert completed.returncode == 0, completed.stderr
    assert rewards == {"reward": 0.0, "accuracy": 0.0, "style": 0.0}
    assert judges["per_judge"]["script"]["credited"] is False


def test_an_interrupted_script_gets_its_keys_as_zero(tmp_path: Path) -> None:
    """A script that wrote its keys and was then interrupted (exit 130: no reward is
    read) gets each key as 0, not as written."""
    completed, rewards, judges = grade(tmp_path, MULTI_KEY + "exit 130\n")
    assert completed.returncode == 0, completed.stderr
    assert rewards == {"reward": 0.0, "accuracy": 0.0, "style": 0.0}
    assert judges["per_judge"]["script"]["credited"] is False


def test_planted_reward_json_with_extra_keys_adds_none(tmp_path: Path) -> None:
    """The tests write reward.txt; the code under test plants a reward.json of its own
    with more keys: the judge fails, and reward.json has the reward alone."""
    plant = f"echo '{EVIL}' > /media/reward.json\n"
    completed, rewards, judges = grade(tmp_path, ONE_VALUE, plant, reward_files="reward.txt")
    assert completed.returncode == 0, completed.stderr
    assert rewards == {"reward": 0.0}
    assert "never write it" in judges["per_judge"]["script"]["rationale"]


def test_a_reward_json_the_code_under_test_wrote_first_is_the_scripts_after(
    tmp_path: Path,
) -> None:
    """The code under test writes reward.json with extra keys before the script writes
    its own: the script's replaces it, no key of the plant survives."""
    plant = f"echo '{EVIL}' > /media/reward.json\n"
    completed, rewards, _ = grade(tmp_path, MULTI_KEY, plant)
    assert completed.returncode == 0, completed.stderr
    assert rewards == {"reward": 0.75, "accuracy": 0.5, "style": 1.0}


def test_a_process_left_behind_cannot_rewrite_the_keys(tmp_path: Path) -> None:
    """The code under test leaves a process that rewrites reward.json once the script has
    written its own: it is gone with the script, the script's keys stand."""
    plant = f"(sleep 2; echo '{EVIL}' > /media/reward.json) </dev/null >/dev/null 2>&1 &\n"
    completed, rewards, _ = grade(tmp_path, MULTI_KEY, plant)
    assert completed.returncode == 0, completed.stderr
    assert rewards == {"reward": 0.75, "accuracy": 0.5, "style": 1.0}


def test_native_without_one_script_judge_exits_2_before_grading(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text("name: x\njudges:\n  - {name: a, check: 'return True'}\n")
    case = tmp_path / "case"
    case.mkdir()
    completed = subprocess.run(
        [
            VERIFIER,
            "grade",
            "--config",
            str(config),
            "--case",
            str(case),
            "--out",
            str(tmp_path / "out"),
            "--reward-keys",
            "native",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert "--reward-keys native" in completed.stderr
    assert "0 tests/script judges" in completed.stderr
    assert "Traceback" not in completed.stderr
    assert not (tmp_path / "out" / "reward.json").exists()


@pytest.mark.parametrize("written", ["tests/script", "script"])
def test_the_script_judge_is_found_by_either_name(written: str, tmp_path: Path) -> None:
    """The builtin SCRIPT_BUILTIN names is the one that writes the details native reads."""
    assert find_builtin(SCRIPT_BUILTIN) is find_builtin(written) is not None
    tests = tmp_path / "task-tests"
    tests.mkdir()
    config = tmp_path / "eval.yaml"
    config.write_text(
        f"name: x\njudges:\n  - name: s\n    builtin: {written}\n"
        "    arguments: {tests: task-tests, case_at: /srv}\n"
    )
    check_reward_keys(load_eval(config).config, NATIVE_REWARD_KEYS)
