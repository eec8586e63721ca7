"""`verifier grade` and `verifier check` end to end, as a user runs them: real processes,
real case dirs, exit codes and the files left behind."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

VERIFIER = str(Path(sys.executable).with_name("verifier"))

EVAL = textwrap.dedent("""
    name: cli-example
    outputs:
      - path: report.md
    judges:
      - name: has_report
        builtin: file_exists
        arguments: {path: report.md}
      - name: mentions_fix
        check: |
          return "fixed" in outputs["files"].get("report.md", "").lower()
      - name: quality
        score_range: [1, 5]
        check: |
          print("judge chatter")
          return 4, "four of five"
      - name: broken
        check: |
          return 1 / 0
      - name: skipped_one
        if: "False"
        check: |
          return 5
    reward:
      formula: weighted
      weights: {mentions_fix: 1, quality: 1}
""")


# EVAL with a judge that runs past every deadline these tests set.
OVERRUNNING = EVAL.replace(
    "  - name: broken\n",
    "  - name: slow\n    timeout: 100\n    check: |\n      import time\n      time.sleep(100)\n"
    "      return 5\n  - name: broken\n",
)


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    config = tmp_path / "tests" / "eval.yaml"
    config.parent.mkdir()
    config.write_text(EVAL)
    case = tmp_path / "case"
    case.mkdir()
    (case / "report.md").write_text("The bug is fixed.\n")
    return {"config": config, "case": case, "out": tmp_path / "out", "root": tmp_path}


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    return subprocess.run(
        [VERIFIER, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60
    )


def grade_args(layout: dict[str, Path]) -> list[str]:
    return [
        "grade",
        "--config",
        str(layout["config"]),
        "--case",
        str(layout["case"]),
        "--out",
        str(layout["out"]),
    ]


def test_grade_writes_the_three_files_and_a_summary(layout: dict[str, Path]) -> None:
    completed = run(*grade_args(layout))
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0] == (
        "reward=0.8750  [has_report=1.0, mentions_fix=1.0, quality=4.0, broken=error, "
        "skipped_one=skipped]"
    )
    assert lines[1:] == [
        f"wrote {layout['out'] / name}"
        for name in ("judges.json", "reward-details.json", "reward.txt", "reward.json")
    ]
    reward = json.loads((layout["out"] / "reward.json").read_text())
    assert reward == {"reward": 0.875, "has_report": 1.0, "mentions_fix": 1.0, "quality": 4.0}
    assert float((layout["out"] / "reward.txt").read_text()) == reward["reward"]
    judges = json.loads((layout["out"] / "judges.json").read_text())
    assert judges["reward"] == 0.875
    assert judges["per_judge"]["quality"] == {
        "value": 4.0,
        "rationale": "four of five",
        "status": "ok",
        "error": None,
        "judge_type": "check",
        "duration_s": judges["per_judge"]["quality"]["duration_s"],
    }
    assert judges["per_judge"]["broken"]["status"] == "error"
    assert judges["per_judge"]["broken"]["error"].startswith("ZeroDivisionError")
    assert judges["per_judge"]["skipped_one"]["status"] == "skipped"
    assert judges["composition"]["contributions"] == {"mentions_fix": 1.0, "quality": 0.75}
    assert "warning: judge broken: error: ZeroDivisionError" in completed.stderr
    assert "judge chatter" in completed.stderr
    assert sorted(p.name for p in layout["out"].iterdir()) == [
        "judges.json",
        "reward-details.json",
        "reward.json",
        "reward.txt",
    ]


def test_termination_log_gets_the_summary_line(layout: dict[str, Path]) -> None:
    termination = layout["root"] / "termination-log"
    completed = run(*grade_args(layout), "--termination-log", str(termination))
    assert completed.returncode == 0, completed.stderr
    assert termination.read_text() == completed.stdout.splitlines()[0] + "\n"


def test_zero_reward_still_exits_zero(layout: dict[str, Path]) -> None:
    (layout["case"] / "report.md").unlink()
    (layout["case"] / "other.txt").write_text("nothing useful")
    completed = run(*grade_args(layout))
    assert completed.returncode == 0
    assert json.loads((layout["out"] / "reward.json").read_text())["reward"] == 0.0


def test_environment_variables_set_the_defaults(layout: dict[str, Path]) -> None:
    env = {
        **os.environ,
        "VERIFIER_CONFIG": str(layout["config"]),
        "VERIFIER_CASE": str(layout["case"]),
        "VERIFIER_OUT": str(layout["out"]),
    }
    completed = run("grade", env=env)
    assert completed.returncode == 0, completed.stderr
    assert (layout["out"] / "reward.json").exists()


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ("reward", {"reward": 0.875}),
        ("all", {"reward": 0.875, "has_report": 1.0, "mentions_fix": 1.0, "quality": 4.0}),
        # a chosen judge without a value (errored, skipped) is there, as 0.0
        (
            "quality,broken,skipped_one",
            {"reward": 0.875, "quality": 4.0, "broken": 0.0, "skipped_one": 0.0},
        ),
        ("reward,has_report", {"reward": 0.875, "has_report": 1.0}),
    ],
)
def test_reward_keys_choose_what_reward_json_holds(
    layout: dict[str, Path], keys: str, expected: dict[str, float]
) -> None:
    for given, env in (
        (["--reward-keys", keys], None),
        ([], {**os.environ, "VERIFIER_REWARD_JSON": keys}),
    ):
        completed = run(*grade_args(layout), *given, env=env)
        assert completed.returncode == 0, completed.stderr
        reward = json.loads((layout["out"] / "reward.json").read_text())
        assert reward == expected and next(iter(reward)) == "reward"
        judges = json.loads((layout["out"] / "judges.json").read_text())
        assert set(judges["per_judge"]) == {
            "has_report",
            "mentions_fix",
            "quality",
            "broken",
            "skipped_one",
        }
        details = json.loads((layout["out"] / "reward-details.json").read_text())
        assert next(iter(details)) == "reward" and len(details) == 6


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("quality,nosuch", "'nosuch' is not a judge of"),
        ("all,quality", "use reward, all, native, or judge names"),
        (",", "use reward, all, native, or judge names"),
    ],
)
def test_reward_keys_naming_no_judge_exit_2_before_grading(
    layout: dict[str, Path], keys: str, message: str
) -> None:
    completed = run(*grade_args(layout), "--reward-keys", keys)
    assert completed.returncode == 2
    assert message in completed.stderr and "--reward-keys" in completed.stderr
    assert not (layout["out"] / "reward.json").exists()


@pytest.mark.slow
def test_a_grade_whose_judges_overrun_writes_its_reward_before_the_deadline(
    layout: dict[str, Path],
) -> None:
    """Judges whose timeouts add up past the deadline: the process, start to reward files,
    ends within it; the judges still running are timeouts, which on_error decides."""
    layout["config"].write_text(OVERRUNNING)
    for given, env in ((["--deadline", "4"], None), ([], {**os.environ, "VERIFIER_DEADLINE": "4"})):
        started = time.monotonic()
        completed = run(*grade_args(layout), *given, env=env)
        assert time.monotonic() - started < 4
        assert completed.returncode == 0, completed.stderr
        judges = json.loads((layout["out"] / "judges.json").read_text())
        assert judges["per_judge"]["slow"]["status"] == "timeout"
        assert "the grade's deadline (--deadline 4s" in judges["per_judge"]["slow"]["error"]
        assert json.loads((layout["out"] / "reward.json").read_text())["reward"] == 0.875


@pytest.mark.slow
def test_the_deadline_counts_from_the_processs_start(layout: dict[str, Path]) -> None:
    """A process that takes 3 s to reach the grade (here a sleep before it execs the
    verifier, in place of a loaded node's slow start and imports) still writes its
    reward within --deadline 5 of its start: it was 3 s late, the deadline counted
    from after the imports."""
    layout["config"].write_text(OVERRUNNING)
    late_start = "import os, sys, time; time.sleep(3); os.execv(sys.argv[1], sys.argv[1:])"
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-c", late_start, VERIFIER, *grade_args(layout), "--deadline", "5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    took = time.monotonic() - started
    assert completed.returncode == 0, completed.stderr
    judges = json.loads((layout["out"] / "judges.json").read_text())
    assert judges["per_judge"]["slow"]["status"] == "timeout"
    assert 3 < took < 5, took  # from after the imports, it was 3 + 5 - 0.5 s


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan"])
def test_a_bad_deadline_is_a_usage_error(layout: dict[str, Path], value: str) -> None:
    completed = run(*grade_args(layout), f"--deadline={value}")
    assert completed.returncode == 2
    assert "--deadline" in completed.stderr and "seconds" in completed.stderr


def write_stale_reward(out: Path) -> None:
    out.mkdir(exist_ok=True)
    (out / "reward.json").write_text('{"reward": 1.0}')
    (out / "reward.txt").write_text("1.0")


@pytest.mark.parametrize(
    ("config_text", "message"),
    [
        ("judges: [\n", "invalid YAML"),
        (
            "judges:\n  - {name: a, chekc: x}\n",
            "judges[0] (a).chekc: unknown judge key (did you mean 'check'?)",
        ),
        ("judges:\n  - {name: a, check: 'return ('}\n", "judges[0] (a).check: does not compile"),
        (
            "judges:\n  - {name: a, module: nomodule_here, function: f}\n",
            "cannot import 'nomodule_here'",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1'}\nreward: {formula: 'a ** 2'}\n",
            "reward.formula: '**' is not allowed",
        ),
        ("judges:\n  - {name: a, check: 'return 1', score_range: [2, 1]}\n", "must be increasing"),
        ("judges:\n  - {name: reward, check: 'return 1'}\n", "'reward' is reserved"),
    ],
)
def test_load_errors_exit_2_with_one_line_and_no_reward(
    layout: dict[str, Path], config_text: str, message: str
) -> None:
    layout["config"].write_text(config_text)
    write_stale_reward(layout["out"])
    completed = run(*grade_args(layout))
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr.count("\n") == 1
    assert completed.stderr.startswith(f"verifier: error: {layout['config']}: ")
    assert message in completed.stderr
    assert "Traceback" not in completed.stderr
    assert not (layout["out"] / "reward.json").exists()
    assert not (layout["out"] / "reward.txt").exists()


def test_missing_config_exits_2(layout: dict[str, Path]) -> None:
    layout["config"].unlink()
    completed = run(*grade_args(layout))
    assert completed.returncode == 2
    assert "file not found; pass --config or set VERIFIER_CONFIG" in completed.stderr


@pytest.mark.parametrize("problem", ["missing", "file", "dangling link"])
def test_case_problems_exit_3_and_leave_no_reward(layout: dict[str, Path], problem: str) -> None:
    for child in layout["case"].iterdir():
        child.unlink()
    layout["case"].rmdir()
    if problem == "file":
        layout["case"].write_text("x")
    elif problem == "dangling link":
        layout["case"].symlink_to(layout["root"] / "nowhere")
    write_stale_reward(layout["out"])
    completed = run(*grade_args(layout))
    assert completed.returncode == 3
    assert completed.stderr.startswith(f"verifier: error: {layout['case']}")
    assert not (layout["out"] / "reward.json").exists()


def test_an_empty_case_dir_is_graded_with_a_warning(layout: dict[str, Path]) -> None:
    """An agent that did nothing gets the reward its judges give nothing: a number RL
    training can use, not a verifier error."""
    for child in layout["case"].iterdir():
        child.unlink()
    completed = run(*grade_args(layout))
    assert completed.returncode == 0, completed.stderr
    assert json.loads((layout["out"] / "reward.json").read_text())["reward"] == 0.0
    assert "warning: the case dir is empty: the agent left nothing" in completed.stderr


def test_unwritable_out_dir_exits_4(layout: dict[str, Path]) -> None:
    blocker = layout["root"] / "blocker"
    blocker.write_text("a file where a dir should be")
    args = grade_args(layout)
    args[-1] = str(blocker / "out")
    completed = run(*args)
    assert completed.returncode == 4
    assert completed.stderr == (
        f"verifier: error: {blocker / 'out'}: output directory is not writable by UID "
        f"{os.getuid()} (Not a directory); mount it read-write and writable by UID "
        f'{os.getuid()} (podman: -v DIR:{blocker / "out"}:U; docker: --user "$(id -u):0"; '
        "or chown/chmod DIR) or pass --out\n"
    )


def test_on_error_fail_writes_no_reward_and_exits_5(layout: dict[str, Path]) -> None:
    layout["config"].write_text(EVAL + "  on_error: fail\n")
    write_stale_reward(layout["out"])
    completed = run(*grade_args(layout))
    assert completed.returncode == 5
    assert completed.stderr.strip().endswith(
        "reward.on_error is fail and a judge errored, so no reward: broken: error: "
        "ZeroDivisionError: division by zero (at <judges[3] (broken).check>:1)"
    )
    assert leftovers(layout["out"]) == []
    check = run("check", str(layout["config"]))
    assert "on_error: fail (an errored judge means no reward (exit 5))" in check.stdout


def leftovers(out: Path) -> list[str]:
    return sorted(path.name for path in out.iterdir()) if out.exists() else []


def test_a_reward_json_that_cannot_be_replaced_leaves_no_file_of_the_run(
    layout: dict[str, Path],
) -> None:
    """A judge plants a directory where reward.json goes: nothing of this run survives."""
    planted = layout["out"] / "reward.json" / "x"
    layout["config"].write_text(
        f"""judges:
  - name: planter
    check: |
      import os
      os.makedirs({str(planted)!r})
      return True
"""
    )
    completed = run(*grade_args(layout))
    assert completed.returncode == 4, completed.stderr
    assert "the reward files cannot be written" in completed.stderr
    assert leftovers(layout["out"]) == []


def test_a_full_disk_leaves_no_file_of_the_run(layout: dict[str, Path]) -> None:
    write_stale_reward(layout["out"])
    completed = subprocess.run(
        [VERIFIER, *grade_args(layout)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200)),
    )
    assert completed.returncode == 4, completed.stderr
    assert "File too large" in completed.stderr
    assert leftovers(layout["out"]) == []


def test_an_earlier_reward_that_cannot_be_removed_is_exit_6(layout: dict[str, Path]) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a file undeletable (chattr +i) needs root; CI runs as root")
    write_stale_reward(layout["out"])
    stale = layout["out"] / "reward.json"
    subprocess.run(["chattr", "+i", str(stale)], check=True)
    try:
        layout["config"].write_text("judges: [\n")  # a broken config: no reward this run
        completed = run(*grade_args(layout))
    finally:
        subprocess.run(["chattr", "-i", str(stale)], check=True)
    assert completed.returncode == 6
    assert "invalid YAML" in completed.stderr
    assert "from an earlier run, cannot be removed" in completed.stderr
    assert not (layout["out"] / "reward.txt").exists()


def test_config_inside_the_case_dir_is_refused(layout: dict[str, Path]) -> None:
    planted = layout["case"] / "eval.yaml"
    planted.write_text(EVAL)
    args = grade_args(layout)
    args[2] = str(planted)
    completed = run(*args)
    assert completed.returncode == 2
    assert "lies inside the case dir" in completed.stderr


def test_debug_shows_the_traceback(layout: dict[str, Path]) -> None:
    layout["config"].write_text("judges: [\n")
    completed = run(*grade_args(layout), "--debug")
    assert completed.returncode == 2
    assert "Traceback" in completed.stderr


def test_python_m_verifier_ignores_modules_planted_in_the_working_dir(
    layout: dict[str, Path],
) -> None:
    (layout["case"] / "yaml.py").write_text("raise SystemExit('planted yaml imported')\n")
    (layout["case"] / "attrs.py").write_text("raise SystemExit('planted attrs imported')\n")
    completed = subprocess.run(
        [sys.executable, "-m", "verifier", *grade_args(layout)],
        capture_output=True,
        text=True,
        cwd=layout["case"],
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    assert "planted" not in completed.stderr


def test_check_lists_judges_and_reward_mode(layout: dict[str, Path]) -> None:
    completed = run("check", str(layout["config"]))
    assert completed.returncode == 0, completed.stderr
    assert f"{layout['config']}: valid" in completed.stdout
    assert "  quality: check, score_range [1, 5], timeout 60s" in completed.stdout
    assert "  has_report: builtin file_exists" in completed.stdout
    assert "reward: weighted (mentions_fix=1, quality=1), gate on" in completed.stdout


def test_check_lists_every_problem_and_exits_2(layout: dict[str, Path]) -> None:
    layout["config"].write_text(
        "judges:\n  - {name: a, chekc: x}\n  - {name: b, check: 'return 1', timeout: -1}\n"
        "reward: {weights: {b: -1}}\n"
    )
    completed = run("check", str(layout["config"]))
    assert completed.returncode == 2
    assert "invalid (3 problems)" in completed.stdout
    assert completed.stdout.count("  error: ") == 3


def test_check_warns_about_names_that_match_no_judge(layout: dict[str, Path]) -> None:
    layout["config"].write_text(
        "judges:\n  - {name: quality, check: 'return 1'}\nreward: {formula: 'qualty'}\n"
    )
    completed = run("check", str(layout["config"]))
    assert completed.returncode == 0
    assert "'qualty' matches no judge" in completed.stderr
    assert "did you mean 'quality'?" in completed.stderr


MODEL_FROM_THE_ENVIRONMENT = textwrap.dedent("""
    judges:
      - name: quality
        llm_rubric: Is the report clear?
        score_range: [1, 5]
      - name: has_report
        builtin: file_exists
        arguments: {path: report.md}
""")


def without_model() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "EVAL_JUDGE_MODEL"}


def test_check_warns_about_a_model_left_to_the_grading_environment(
    layout: dict[str, Path],
) -> None:
    layout["config"].write_text(MODEL_FROM_THE_ENVIRONMENT)
    completed = run("check", str(layout["config"]), env=without_model())
    assert completed.returncode == 0, completed.stdout
    assert f"{layout['config']}: valid (1 warning)" in completed.stdout
    assert "  quality: llm $EVAL_JUDGE_MODEL, score_range [1, 5]" in completed.stdout
    assert completed.stderr == (
        f"warning: {layout['config']}: judges[0] (quality).model: no model here: set "
        "$EVAL_JUDGE_MODEL when grading (or model on the judge, or models.judge in eval.yaml)\n"
    )
    strict = run("check", "--strict", str(layout["config"]), env=without_model())
    assert strict.returncode == 2
    assert f"{layout['config']}: invalid under --strict (1 warning)" in strict.stdout
    assert "no model here" in strict.stderr
    with_model = run(
        "check",
        "--strict",
        str(layout["config"]),
        env={**without_model(), "EVAL_JUDGE_MODEL": "openai/m"},
    )
    assert with_model.returncode == 0, with_model.stderr
    assert "  quality: llm $EVAL_JUDGE_MODEL" in with_model.stdout


def test_check_still_validates_the_rest_of_a_judge_without_a_model(
    layout: dict[str, Path],
) -> None:
    """A judge's other checks run before its model is looked for, so they are reported."""
    (layout["config"].parent / "guide.md").write_text("x" * (1024 * 1024 + 1))
    layout["config"].write_text(
        MODEL_FROM_THE_ENVIRONMENT.replace("score_range: [1, 5]", "context: guide.md")
        + "  - {name: b, check: 'return ('}\n"
    )
    completed = run("check", str(layout["config"]), env=without_model())
    assert completed.returncode == 2
    assert "invalid (2 problems)" in completed.stdout
    assert "judges[0] (quality).context: " in completed.stdout
    assert "the limit is 1048576" in completed.stdout
    assert "judges[2] (b).check: does not compile" in completed.stdout


def test_grade_still_refuses_to_grade_without_a_model(layout: dict[str, Path]) -> None:
    layout["config"].write_text(MODEL_FROM_THE_ENVIRONMENT)
    write_stale_reward(layout["out"])
    completed = run(*grade_args(layout), env=without_model())
    assert completed.returncode == 2
    assert completed.stderr == (
        f"verifier: error: {layout['config']}: judges[0] (quality).model: no model for this "
        "LLM judge: set model on the judge, models.judge in eval.yaml, or $EVAL_JUDGE_MODEL\n"
    )
    assert not (layout["out"] / "reward.json").exists()


SLOW_JUDGES = """\
judges:
  - name: a
    timeout: 400
    check: "return True"
  - name: b
    timeout: 300
    check: "return True"
"""


def harbor_task(root: Path, verifier_toml: str) -> Path:
    """A Harbor task dir as `verifier task init` lays it out: task.toml, tests/eval.yaml."""
    task = root / "task"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "eval.yaml").write_text(SLOW_JUDGES)
    (task / "task.toml").write_text(f'schema_version = "1.4"\n\n[verifier]\n{verifier_toml}')
    return task


@pytest.mark.slow
@pytest.mark.parametrize(
    ("verifier_toml", "warned"),
    [
        (
            "timeout_sec = 600.0\n",
            "no VERIFIER_DEADLINE: when they run long, Harbor kills the "
            'verifier and the trial has no reward; set [verifier] env VERIFIER_DEADLINE = "540"',
        ),
        (
            'timeout_sec = 600.0\nenv = {VERIFIER_DEADLINE = "598"}\n',
            "VERIFIER_DEADLINE = 598 is not at least 60s below Harbor's [verifier] timeout_sec "
            "= 600 (what Harbor's own execs can take on a loaded node): Harbor may kill the "
            "verifier before it writes the reward; set it to 540 or less, or raise "
            "timeout_sec to 658",
        ),
        (
            'timeout_sec = 30.0\nenv = {VERIFIER_DEADLINE = "20"}\n',
            "VERIFIER_DEADLINE = 20 is not at least 60s below Harbor's [verifier] timeout_sec "
            "= 30 (what Harbor's own execs can take on a loaded node): Harbor may kill the "
            "verifier before it writes the reward; raise timeout_sec to 80",
        ),
        (
            "timeout_sec = 30.0\n",
            "raise timeout_sec above 60 and set a VERIFIER_DEADLINE 60s below it",
        ),
        (
            'timeout_sec = 600.0\nenv = {VERIFIER_DEADLINE = "540"}\n',
            "more than the deadline of 540s leaves them (538s)",
        ),
        ("", "timeout_sec = 600 leaves them"),  # Harbor's default timeout
    ],
)
def test_check_of_a_task_dir_warns_when_the_judges_can_overrun_harbors_timeout(
    tmp_path: Path, verifier_toml: str, warned: str
) -> None:
    task = harbor_task(tmp_path, verifier_toml)
    completed = run("check", str(task))
    assert completed.returncode == 0, completed.stderr
    assert "add up to 700s (longest: a 400s, b 300s)" in completed.stderr
    assert warned in completed.stderr
    assert run("check", str(task), "--strict").returncode == 2
    assert warned in run("check", str(task / "task.toml")).stderr  # its task.toml: the same


def test_check_is_quiet_when_the_judges_fit_the_deadline_and_harbors_timeout(
    tmp_path: Path,
) -> None:
    task = harbor_task(tmp_path, 'timeout_sec = 900.0\nenv = {VERIFIER_DEADLINE = "800"}\n')
    completed = run("check", str(task), "--strict")
    assert completed.returncode == 0, completed.stderr
    assert "warning" not in completed.stderr


def test_check_deadline_warns_for_an_eval_yaml(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text(SLOW_JUDGES)
    completed = run("check", str(config), "--deadline", "100")
    assert "more than the deadline of 100s leaves them (98s)" in completed.stderr
    assert "warning" not in run("check", str(config)).stderr
    assert "warning" not in run("check", str(config), "--deadline", "800").stderr


def test_check_warns_about_a_setting_harbor_would_scrub_as_a_secret(tmp_path: Path) -> None:
    """Harbor replaces the value of an env name with KEY (TOKEN, ...) in every file of
    the trial: `VERIFIER_REWARD_KEYS = "reward"` would corrupt reward.json."""
    task = harbor_task(
        tmp_path,
        'timeout_sec = 900.0\nenv = {VERIFIER_DEADLINE = "800", VERIFIER_REWARD_KEYS = '
        '"reward", OPENAI_API_KEY = "${OPENAI_API_KEY}"}\n',
    )
    completed = run("check", str(task))
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr.count("Harbor takes") == 1
    assert (
        "env VERIFIER_REWARD_KEYS = 'reward': Harbor takes VERIFIER_REWARD_KEYS for a secret"
        in (completed.stderr)
    )


def test_check_of_a_dir_without_task_toml_is_a_usage_error(tmp_path: Path) -> None:
    completed = run("check", str(tmp_path))
    assert completed.returncode == 2
    assert "no task.toml in it" in completed.stderr


def test_check_strict_fails_on_any_warning(layout: dict[str, Path]) -> None:
    layout["config"].write_text("judges:\n  - {name: a, check: 'return 1'}\nrewrd: {}\n")
    assert run("check", str(layout["config"])).returncode == 0
    completed = run("check", "--strict", str(layout["config"]))
    assert completed.returncode == 2
    assert "rewrd: unknown top-level key, ignored (did you mean 'reward'?)" in completed.stderr


def test_grade_with_unbound_formula_name_warns_and_gives_zero(layout: dict[str, Path]) -> None:
    layout["config"].write_text(
        "judges:\n  - {name: quality, check: 'return 5'}\nreward: {formula: 'qualty'}\n"
    )
    completed = run(*grade_args(layout))
    assert completed.returncode == 0
    assert completed.stdout.startswith("reward=0.0000")
    assert "reward.formula failed: name 'qualty' is not defined" in completed.stderr


@pytest.mark.parametrize("variable", ["VERIFIER_JUDGE_MEMORY_MB", "VERIFIER_LLM_PARALLEL"])
def test_bad_numeric_environment_is_a_usage_error(layout: dict[str, Path], variable: str) -> None:
    completed = run(*grade_args(layout), env={**os.environ, variable: "lots"})
    assert completed.returncode == 2
    assert "'lots' is not a whole number" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_grade_help_documents_exit_codes() -> None:
    completed = run("grade", "--help")
    assert completed.returncode == 0
    assert "\n    3    case dir missing, unreadable or not a directory\n" in completed.stdout


def test_top_level_help_lists_commands() -> None:
    completed = run("--help")
    assert completed.returncode == 0
    for command in ("grade", "check"):
        assert command in completed.stdout
