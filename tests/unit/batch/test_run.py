"""`verifier batch` on a few hundred generated cases: every case graded exactly once, the
same reward `verifier grade` writes, a correct summary, resume, --force, shards, Harbor
job dirs, and no bad case (or dying worker) stopping the batch."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from verifier.batch import (
    MARKER,
    BatchRequest,
    BatchSummary,
    Case,
    CaseOutcome,
    CaseStatus,
    Progress,
    Shard,
    discover_cases,
    harbor_trial_case,
    run_batch,
    run_pool,
    summary_paths,
)
from verifier.batch.layout import batch_lock
from verifier.cli.parser import run as run_cli
from verifier.engine import Limits
from verifier.errors import OutputError, UsageError
from verifier.judges.base import Pool
from verifier.parsers import parse_reward_keys
from verifier.system import available_cpus

VERIFIER = str(Path(sys.executable).with_name("verifier"))

# Three inline judges. Each run of `has_report` appends the case dir to a log, so the
# test can count how often every case was graded. "BOOM" in a report makes a judge
# error (it returns no value); "HANG" makes one time out.
EVAL = """\
name: batch-test
outputs:
  - path: report.md
judges:
  - name: has_report
    arguments: {{log: "{log}"}}
    check: |
      with open(arguments["log"], "a") as log:
          log.write(outputs["case_dir"] + "\\n")
      return "report.md" in outputs["files"]
  - name: mentions_fix
    check: |
      text = outputs["files"].get("report.md", "")
      if "BOOM" in text:
          return None  # no value: an error record
      return "fixed" in text.lower()
  - name: length_score
    score_range: [1, 5]
    timeout: 2
    check: |
      text = outputs["files"].get("report.md", "")
      if "HANG" in text:
          import time
          time.sleep(30)
      return min(5, max(1, len(text.split()) // 20 + 1))
"""

KINDS = ("pass", "short", "fail", "boom", "no-report", "empty")


def make_corpus(root: Path, count: int, *, hang: int = 0) -> tuple[Path, Path, Path]:
    """count cases cycling through KINDS (+ `hang` cases whose judge times out)."""
    log = root / "judge-calls.log"
    config = root / "config" / "eval.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(EVAL.format(log=log))
    cases = root / "cases"
    for index in range(count):
        kind = KINDS[index % len(KINDS)]
        case = cases / f"{kind}-{index:04d}"
        case.mkdir(parents=True)
        write_kind(case, kind)
    for index in range(hang):
        (cases / f"hang-{index}").mkdir()
        (cases / f"hang-{index}" / "report.md").write_text("HANG fixed")
    return config, cases, log


def write_kind(case: Path, kind: str) -> None:
    text = {
        "pass": "The bug is fixed. " * 30,
        "short": "fixed",
        "fail": "Could not reproduce it. " * 12,
        "boom": "BOOM fixed " * 25,
    }.get(kind)
    if text is not None:
        (case / "report.md").write_text(text)
    elif kind == "no-report":
        (case / "notes.txt").write_text("no report here\n")


def batch(config: Path, cases: Path, out: Path, **fields) -> BatchSummary:
    fields.setdefault("jobs", 2)
    return run_batch(BatchRequest(config, cases, out, progress=io.StringIO(), **fields))


def calls(log: Path) -> Counter[str]:
    return (
        Counter(Path(line).name for line in log.read_text().splitlines())
        if log.exists()
        else Counter()
    )


def rows(summary: BatchSummary) -> dict[str, CaseOutcome]:
    return {row.name: row for row in summary.outcomes}


# --- a few hundred cases, graded once -------------------------------------------


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("batch")
    config, cases, log = make_corpus(root, 300)
    out = root / "out"
    summary = batch(config, cases, out)
    return {"config": config, "cases": cases, "out": out, "log": log, "summary": summary}


@pytest.mark.slow
def test_every_case_graded_exactly_once(graded) -> None:
    names = sorted(path.name for path in graded["cases"].iterdir())
    summary = graded["summary"]
    assert [row.name for row in summary.outcomes] == names
    assert calls(graded["log"]) == Counter(dict.fromkeys(names, 1))


@pytest.mark.slow
def test_rewards_identical_to_verifier_grade(graded, tmp_path: Path) -> None:
    """The in-process grade path for every case, and the real CLI for a sample."""
    for case in sorted(graded["cases"].iterdir()):
        out = tmp_path / case.name
        code = run_cli(
            ["grade", "--config", str(graded["config"]), "--case", str(case), "--out", str(out)]
        )
        batch_out = graded["out"] / case.name
        assert code == 0
        for name in ("reward.json", "reward.txt"):
            assert (batch_out / name).read_text() == (out / name).read_text(), case.name
        assert json.loads((batch_out / "judges.json").read_text())["per_judge"].keys() == {
            "has_report",
            "mentions_fix",
            "length_score",
        }
    for case in sorted(graded["cases"].iterdir())[:6]:
        out = tmp_path / "cli" / case.name
        command = [VERIFIER, "grade", "--config", str(graded["config"]), "--case", str(case)]
        completed = subprocess.run([*command, "--out", str(out)], capture_output=True, timeout=60)
        assert completed.returncode == 0
        assert (out / "reward.json").read_bytes() == (
            graded["out"] / case.name / "reward.json"
        ).read_bytes()


def summary_json(out: Path) -> dict:
    return json.loads(summary_paths(out, None)[0].read_text())


def test_summary_json_and_csv(graded) -> None:
    out, summary = graded["out"], graded["summary"]
    document = summary_json(out)
    rewards = {
        name: json.loads((out / name / "reward.json").read_text())["reward"]
        for name in rows(summary)
        if (out / name / "reward.json").exists()
    }
    assert document["count"] == 300
    assert document["errors"] == 0  # an empty case dir is graded like any other
    assert document["graded"] == 300 == len(rewards)
    assert document["resumed"] == document["skipped"] == 0
    assert document["mean_reward"] == pytest.approx(sum(rewards.values()) / len(rewards))
    assert document["cases_with_judge_errors"] == 50  # the BOOM cases: rewarded, not errors
    assert document["judges_errored"] == 50
    assert document["interrupted"] is False and document["stopped_by"] is None
    assert document["llm"] is None  # no LLM judge in this config
    by_case = {row["case"]: row for row in document["cases"]}
    assert by_case["boom-0003"]["errored_judges"] == ["mentions_fix"]
    assert by_case["boom-0003"]["reward"] == rewards["boom-0003"]
    assert by_case["empty-0005"]["status"] == "ok" and by_case["empty-0005"]["reward"] == 0.0
    empty_judges = json.loads((out / "empty-0005" / "judges.json").read_text())
    assert "the case dir is empty: the agent left nothing" in empty_judges["case_warnings"]
    assert by_case["pass-0000"] == {
        **by_case["pass-0000"],
        "status": "ok",
        "reward": 1.0,
        "errored_judges": [],
    }
    with summary_paths(out, None)[1].open() as handle:
        table = list(csv.DictReader(handle))
    assert [row["case"] for row in table] == list(by_case)
    assert {row["case"]: row["reward"] for row in table if row["reward"]} == {
        name: repr(value) for name, value in rewards.items()
    }
    assert table[3]["errored_judges"] == "mentions_fix"
    assert all(float(row["time_s"]) > 0 for row in table)
    assert {row["requests"] for row in table} == {row["cache_hits"] for row in table} == {"0"}


def test_a_marker_beside_every_graded_case(graded) -> None:
    marker = json.loads((graded["out"] / "pass-0000" / MARKER).read_text())
    assert marker["status"] == "ok"
    assert marker["config_hash"] == graded["summary"].config_hash


# --- resume, --force, a changed config ------------------------------------------------


@pytest.fixture
def small(tmp_path: Path):
    config, cases, log = make_corpus(tmp_path, 60)
    out = tmp_path / "out"
    first = batch(config, cases, out)
    return {"config": config, "cases": cases, "out": out, "log": log, "first": first}


def test_resume_skips_graded_cases_and_retries_errors(tmp_path: Path) -> None:
    """Rerun: rewarded cases are skipped; failed cases (an out dir that could not be
    made) and cases whose judges errored (the BOOM cases) are graded again."""
    config, cases, log = make_corpus(tmp_path, 60)
    out = tmp_path / "out"
    out.mkdir()
    (out / "fail-0002").write_text("a file where the case's out dir should be")
    first = batch(config, cases, out)
    assert rows(first)["fail-0002"].status == "error"
    before = {path.parent.name: path.stat().st_mtime_ns for path in out.glob("*/reward.json")}
    (out / "fail-0002").unlink()
    second = batch(config, cases, out)
    assert second.count(resumed=True) == 49
    assert second.count(status="ok", resumed=False) == 11  # the boom cases and the repaired one
    assert second.count(status="error") == 0
    assert calls(log)["pass-0000"] == 1
    assert calls(log)["boom-0003"] == 2
    assert calls(log)["fail-0002"] == 1
    after = {path.parent.name: path.stat().st_mtime_ns for path in out.glob("*/reward.json")}
    resumed = {name for name in before if not name.startswith("boom")}
    assert {name: after[name] for name in resumed} == {name: before[name] for name in resumed}
    assert rows(second)["pass-0000"].reward == rows(first)["pass-0000"].reward
    document = summary_json(out)
    assert document["resumed"] == 49 and document["count"] == 60


def test_a_reward_lost_or_torn_since_is_graded_again(small) -> None:
    """A batch flushes its files to disk once, at its end: after a crash a case's
    reward.json may be empty though its marker survived. It is not resumed."""
    (small["out"] / "pass-0000" / "reward.json").write_text("")
    (small["out"] / "fail-0002" / "reward.json").write_text('{"reward": 0.123}\n')
    second = batch(small["config"], small["cases"], small["out"], keep_errors=True)
    assert rows(second)["pass-0000"].resumed is False
    assert rows(second)["fail-0002"].resumed is False
    assert second.count(resumed=True) == 58
    assert json.loads((small["out"] / "pass-0000" / "reward.json").read_text())["reward"] == 1.0


def test_keep_errors_resumes_cases_whose_judges_errored(small) -> None:
    second = batch(small["config"], small["cases"], small["out"], keep_errors=True)
    assert second.count(resumed=True) == 60
    assert calls(small["log"])["boom-0003"] == 1
    assert rows(second)["boom-0003"].errored_judges == ("mentions_fix",)


@pytest.mark.slow
def test_force_regrades_everything(small) -> None:
    again = batch(small["config"], small["cases"], small["out"], force=True)
    assert again.count(resumed=True) == 0
    assert again.count(status=CaseStatus.REWARDED) == 60
    assert set(calls(small["log"]).values()) == {2}
    assert [row.reward for row in again.outcomes] == [row.reward for row in small["first"].outcomes]


@pytest.mark.slow
def test_a_changed_config_regrades(small) -> None:
    small["config"].write_text(small["config"].read_text() + "# edited\n")
    again = batch(small["config"], small["cases"], small["out"])
    assert again.count(resumed=True) == 0
    assert again.config_hash != small["first"].config_hash


@pytest.mark.slow
def test_the_memory_limit_is_part_of_the_resume_key(small) -> None:
    again = batch(small["config"], small["cases"], small["out"], limits=Limits(memory_mb=1024))
    assert again.count(resumed=True) == 0


@pytest.mark.slow
def test_no_llm_is_part_of_the_config_hash(small) -> None:
    again = batch(
        small["config"],
        small["cases"],
        small["out"],
        limits=Limits(skip_pools=frozenset({Pool.LLM})),
    )
    assert again.count(resumed=True) == 0


@pytest.mark.slow
def test_reward_keys_shape_every_cases_reward_json_and_the_resume_key(small) -> None:
    """--reward-keys reward: reward.json holds the reward alone (Harbor's pass@k), in every
    case; a changed shape is a changed resume key, so no case keeps the old shape."""
    out = small["out"]
    assert set(json.loads((out / "pass-0000" / "reward.json").read_text())) > {"reward"}
    again = batch(small["config"], small["cases"], out, reward_keys=parse_reward_keys("reward"))
    assert again.count(resumed=True) == 0 and again.config_hash != small["first"].config_hash
    for path in out.glob("*/reward.json"):
        assert list(json.loads(path.read_text())) == ["reward"], path
    chosen = batch(
        small["config"], small["cases"], out, reward_keys=parse_reward_keys("mentions_fix")
    )
    assert chosen.count(resumed=True) == 0
    boom = json.loads((out / "boom-0003" / "reward.json").read_text())
    assert boom == {"reward": boom["reward"], "mentions_fix": 0.0}  # it errored: still there
    assert [row.reward for row in chosen.outcomes] == [
        row.reward for row in small["first"].outcomes
    ]


def test_reward_keys_naming_no_judge_stop_the_batch_before_any_case(tmp_path: Path) -> None:
    config, cases, log = make_corpus(tmp_path, 4)
    with pytest.raises(UsageError, match="'nosuch' is not a judge"):
        batch(config, cases, tmp_path / "out", reward_keys=parse_reward_keys("nosuch"))
    assert calls(log) == Counter()


# --- shards ---------------------------------------------------------------------------


@pytest.mark.slow
def test_shards_are_disjoint_and_complete(tmp_path: Path) -> None:
    config, cases, log = make_corpus(tmp_path, 120)
    out = tmp_path / "out"
    shards = [batch(config, cases, out, jobs=1, shard=Shard(index, 3)) for index in range(3)]
    names = [row.name for summary in shards for row in summary.outcomes]
    assert len(names) == len(set(names)) == 120
    assert all(len(summary.outcomes) > 20 for summary in shards)
    assert set(calls(log).values()) == {1}
    for index in range(3):
        json_path, csv_path = summary_paths(out, Shard(index, 3))
        assert json.loads(json_path.read_text())["shard"] == f"{index}/3"
        assert csv_path.exists()
    assert not summary_paths(out, None)[0].exists()
    merged = batch(config, cases, out, keep_errors=True)  # after the shards: one summary
    assert merged.count(resumed=True) == 120 and merged.count(status="error") == 0
    assert set(calls(log).values()) == {1}


def test_shard_membership_is_stable_and_parsed_strictly() -> None:
    names = [f"case-{index}" for index in range(1000)]
    owners = [[Shard(index, 4).owns(name) for index in range(4)] for name in names]
    assert all(sum(row) == 1 for row in owners)
    assert Shard.parse("2/4") == Shard(2, 4)
    assert str(Shard(2, 4)) == "2/4"
    for bad in ("4/4", "-1/4", "1", "a/b", "0/0"):
        with pytest.raises(UsageError):
            Shard.parse(bad)


# --- what counts as a case -----------------------------------------------------------


def test_hidden_entries_and_the_out_dir_are_not_entries(tmp_path: Path) -> None:
    for name in ("a", "b", ".hidden", "results"):
        (tmp_path / name).mkdir()
    found = discover_cases(tmp_path, tmp_path / "results")
    assert [(case.name, case.skipped) for case in found] == [("a", None), ("b", None)]


@pytest.mark.slow
def test_entries_that_are_not_cases_are_skipped_rows_with_a_reason(tmp_path: Path) -> None:
    """Every entry gives a row: plain files, dangling links and links leaving --cases are
    skipped rows; a link to a case dir inside --cases is a case."""
    config, cases, _ = make_corpus(tmp_path, 0)
    cases.mkdir()
    outside = tmp_path / "outside"
    (outside / "x").mkdir(parents=True)
    (outside / "x" / "report.md").write_text("The bug is fixed. " * 30)
    kinds = ("dir", "file", "dangling", "leaving", "inside")
    for index in range(200):
        kind, entry = kinds[index % 5], cases / f"e{index:04d}"
        if kind in ("dir", "inside"):
            target = cases / f"real-{index:04d}" if kind == "inside" else entry
            target.mkdir()
            (target / "report.md").write_text("fixed")
            if kind == "inside":
                entry.symlink_to(target)
        elif kind == "file":
            entry.write_text("a plain file")
        elif kind == "dangling":
            entry.symlink_to(tmp_path / "nowhere")
        else:
            entry.symlink_to(outside / "x")
    summary = batch(config, cases, tmp_path / "out", jobs=2)
    table = rows(summary)
    assert len(table) == 200 + 40  # every entry, and the real dirs behind the inside links
    skipped = {name: row for name, row in table.items() if row.status == "skipped"}
    assert len(skipped) == 120
    assert skipped["e0001"].error == "not a directory"
    assert "dangling" in skipped["e0002"].error
    assert "leaving --cases" in skipped["e0003"].error
    assert table["e0004"].status == "ok" and table["e0000"].status == "ok"
    assert summary_json(tmp_path / "out")["skipped"] == 120
    assert not (tmp_path / "out" / "e0001").exists()  # a skipped entry gets no out dir


def test_a_case_named_like_a_summary_file_is_just_a_case(tmp_path: Path) -> None:
    config, cases, _ = make_corpus(tmp_path, 2)
    for name in ("summary.json", "summary.csv", "summary.shard-0-of-1.json"):
        (cases / name).mkdir()
        (cases / name / "report.md").write_text("The bug is fixed. " * 30)
    out = tmp_path / "out"
    summary = batch(config, cases, out)
    assert rows(summary)["summary.json"].reward == 1.0
    assert (out / "summary.json" / "reward.json").is_file()
    assert summary_json(out)["count"] == 5
    batch(config, cases, out, shard=Shard(0, 1))
    assert summary_paths(out, Shard(0, 1))[0].is_file()


def test_a_second_batch_on_the_same_out_is_refused_while_the_first_runs(tmp_path: Path) -> None:
    config, cases, _ = make_corpus(tmp_path, 4)
    out = tmp_path / "out"
    with batch_lock(out, None):  # what a running batch holds
        completed = subprocess.run(
            [VERIFIER, "batch", "--config", str(config), "--cases", str(cases), "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert completed.returncode == 4
        assert "another verifier batch is grading into this dir" in completed.stderr
        assert "Traceback" not in completed.stderr
        assert not list(out.glob("*/reward.json"))
        with pytest.raises(OutputError, match="shard 1/2"):
            batch(config, cases, out, shard=Shard(1, 2))
    with batch_lock(out, Shard(0, 2)):  # shards run side by side; a run without --shard waits
        batch(config, cases, out, shard=Shard(1, 2))
        assert summary_paths(out, Shard(1, 2))[0].is_file()
        with pytest.raises(OutputError):
            batch(config, cases, out)
    assert batch(config, cases, out).count() == 4  # and once the lock is gone, it runs


def make_trial(job: Path, name: str, report: str | None, manifest: list | None) -> Path:
    trial = job / name
    (trial / "artifacts" / "app").mkdir(parents=True)
    (trial / "artifacts" / "logs" / "artifacts").mkdir(parents=True)
    (trial / "config.json").write_text(json.dumps({"trial_name": name}))
    if report is not None:
        (trial / "artifacts" / "app" / "report.md").write_text(report)
    if manifest is not None:
        (trial / "artifacts" / "manifest.json").write_text(json.dumps(manifest))
    return trial


APP_MANIFEST = [
    {
        "source": "/logs/artifacts",
        "destination": "artifacts/logs/artifacts",
        "type": "directory",
        "status": "ok",
    },
    {"source": "/app", "destination": "artifacts/app", "type": "directory", "status": "ok"},
]


def test_a_harbor_job_dir_grades_each_trials_artifacts(tmp_path: Path) -> None:
    config, _, _ = make_corpus(tmp_path, 0)
    job = tmp_path / "jobs" / "2026-01-01__00-00-00"
    job.mkdir(parents=True)
    (job / "config.json").write_text(json.dumps({"job_name": job.name, "jobs_dir": "jobs"}))
    (job / "result.json").write_text("{}")
    make_trial(job, "task__AAA", "The bug is fixed. " * 30, APP_MANIFEST)
    make_trial(job, "task__BBB", "nothing", APP_MANIFEST)
    make_trial(job, "task__CCC", None, APP_MANIFEST)  # the agent left /app empty
    summary = batch(config, job, tmp_path / "out")
    outcome = rows(summary)
    assert list(outcome) == ["task__AAA", "task__BBB", "task__CCC"]
    assert outcome["task__AAA"].reward == 1.0
    assert outcome["task__BBB"].status == "ok" and outcome["task__BBB"].reward < 1.0
    assert outcome["task__CCC"].status == "ok" and outcome["task__CCC"].reward == 0.0
    assert (tmp_path / "out" / "task__AAA" / "reward.json").exists()


def test_harbor_trial_case_choice(tmp_path: Path) -> None:
    app = make_trial(tmp_path, "one", "x", APP_MANIFEST)
    assert harbor_trial_case(app) == app / "artifacts" / "app"
    bare = make_trial(tmp_path, "bare", "x", None)
    assert harbor_trial_case(bare) == bare / "artifacts"
    convention = make_trial(tmp_path, "conv", "x", APP_MANIFEST[:1])
    assert harbor_trial_case(convention) == convention / "artifacts" / "logs" / "artifacts"
    two = make_trial(
        tmp_path,
        "two",
        "x",
        [*APP_MANIFEST, {**APP_MANIFEST[1], "source": "/data", "destination": "artifacts/data"}],
    )
    assert harbor_trial_case(two) == two / "artifacts"
    escape = make_trial(tmp_path, "esc", "x", [{**APP_MANIFEST[1], "destination": "../../etc"}])
    assert harbor_trial_case(escape) == escape / "artifacts"


# --- one bad case never stops the batch --------------------------------------------------


@pytest.mark.slow
def test_a_timed_out_judge_is_a_judge_error_not_a_stopped_batch(tmp_path: Path) -> None:
    config, cases, _ = make_corpus(tmp_path, 12, hang=2)
    summary = batch(config, cases, tmp_path / "out")
    assert summary.count(status=CaseStatus.REWARDED) == 14
    assert rows(summary)["hang-0"].errored_judges == ("length_score",)
    assert rows(summary)["hang-0"].timed_out_judges == ("length_score",)
    # every case has a reward (errors=0), and the line still says judges could not run
    assert " errors=0 judge_errors=2 judge_timeouts=2 with_judge_errors=4 " in summary.line()
    document = summary_json(tmp_path / "out")
    assert (document["judges_errored"], document["judges_timed_out"]) == (4, 2)
    assert document["cases"][0]["timed_out_judges"] == []


@pytest.mark.slow
def test_the_deadline_holds_for_each_case_of_a_batch(tmp_path: Path) -> None:
    """--deadline in a batch is each case's: a judge still running when its case's time
    is up is a timeout saying so, and the batch goes on to the next case."""
    config, cases, _ = make_corpus(tmp_path, 4, hang=2)
    started = time.monotonic()
    summary = batch(config, cases, tmp_path / "out", deadline_s=1.0, jobs=1)
    assert time.monotonic() - started < 2 * 1.0 + 5  # two hanging cases, one worker
    assert summary.count(status=CaseStatus.REWARDED) == 6
    assert rows(summary)["hang-0"].errored_judges == ("length_score",)
    judges = json.loads((tmp_path / "out" / "hang-0" / "judges.json").read_text())
    assert "the grade's deadline (--deadline 1s" in judges["per_judge"]["length_score"]["error"]


def crash_on_b(case: Case) -> CaseOutcome:
    if case.name == "b":
        os._exit(7)
    if case.name == "c":
        os.kill(os.getpid(), signal.SIGKILL)
    return CaseOutcome(case.name, "ok", reward=1.0)


def test_a_dying_worker_is_replaced_and_its_case_is_an_error(tmp_path: Path) -> None:
    cases = [Case(name, tmp_path / name, name) for name in "abcdefgh"]
    seen: list[str] = []
    result = run_pool(cases, lambda slot: crash_on_b, 2, lambda row: seen.append(row.name))
    outcomes = result.outcomes
    assert result.stopped_by is None
    assert sorted(seen) == list("abcdefgh")
    assert outcomes["b"].status == "error" and "code 7" in (outcomes["b"].error or "")
    assert outcomes["c"].status == "error" and "SIGKILL" in (outcomes["c"].error or "")
    assert all(outcomes[name].reward == 1.0 for name in "adefgh")


def test_a_case_whose_out_dir_cannot_be_written_is_an_error_row(tmp_path: Path) -> None:
    config, cases, _ = make_corpus(tmp_path, 6)
    out = tmp_path / "out"
    out.mkdir()
    (out / "pass-0000").write_text("a file where the case's dir should be")
    summary = batch(config, cases, out)
    assert rows(summary)["pass-0000"].status == "error"
    assert summary.count(status=CaseStatus.REWARDED) == 5


# --- progress and the command ----------------------------------------------------------


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_on_a_terminal_and_lines_elsewhere() -> None:
    terminal, log = FakeTerminal(), io.StringIO()
    for stream in (terminal, log):
        progress = Progress(40, stream)
        for index in range(40):
            status = CaseStatus.FAILED if index == 3 else CaseStatus.REWARDED
            progress.update(CaseOutcome(f"c{index}", status))
        progress.close()
    assert "\r[" in terminal.getvalue() and "40/40 (100%)" in terminal.getvalue()
    lines = log.getvalue().splitlines()
    assert len(lines) == 20 and all(line.startswith("batch: ") for line in lines)
    assert "40/40 (100%)" in lines[-1] and "errors 1" in lines[-1]


def test_the_cli_prints_the_summary_and_writes_the_termination_log(tmp_path: Path) -> None:
    config, cases, _ = make_corpus(tmp_path, 12)
    out, termination = tmp_path / "out", tmp_path / "termination-log"
    command = [VERIFIER, "batch", "--config", str(config), "--cases", str(cases)]
    completed = subprocess.run(
        [*command, "--out", str(out), "-j", "2", "--termination-log", str(termination)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    line = completed.stdout.splitlines()[0]
    assert line.startswith(
        "batch: cases=12 graded=12 resumed=0 skipped=0 errors=0 judge_errors=2 judge_timeouts=0 "
        "with_judge_errors=2 mean_reward="
    )
    assert termination.read_text().strip() == line.removeprefix("batch: ")
    assert "batch: 12/12 (100%)" in completed.stderr
    env = {**os.environ, "VERIFIER_TERMINATION_LOG": str(termination)}
    again = subprocess.run(
        [*command, "--out", str(out), "--shard", "0/1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "resumed=10" in termination.read_text() and "shard=0/1" in again.stdout


@pytest.mark.parametrize(
    ("arguments", "code", "message"),
    [
        (["--shard", "3/3"], 2, "--shard"),
        (["--cases", "/nonexistent"], 3, "cases directory not found"),
        (["--config", "/nonexistent.yaml"], 2, "file not found"),
    ],
)
def test_cli_errors_have_the_grade_exit_codes(
    tmp_path: Path, arguments: list[str], code: int, message: str
) -> None:
    config, cases, _ = make_corpus(tmp_path, 2)
    base = {"--config": str(config), "--cases": str(cases), "--out": str(tmp_path / "out")}
    base.update(zip(arguments[::2], arguments[1::2], strict=True))
    flat = [item for pair in base.items() for item in pair]
    completed = subprocess.run([VERIFIER, "batch", *flat], capture_output=True, text=True)
    assert completed.returncode == code
    assert message in completed.stderr


def test_an_unwritable_out_is_exit_4(tmp_path: Path) -> None:
    config, cases, _ = make_corpus(tmp_path, 2)
    (tmp_path / "file").write_text("x")
    command = [VERIFIER, "batch", "--config", str(config), "--cases", str(cases)]
    completed = subprocess.run(
        [*command, "--out", str(tmp_path / "file" / "out")], capture_output=True, text=True
    )
    assert completed.returncode == 4


def processes_with(marker: str) -> list[str]:
    """Every process on the machine whose command line holds marker (ps, as a user would)."""
    listing = subprocess.run(
        ["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, check=True
    )
    return [line for line in listing.stdout.splitlines() if marker in line and "ps -ww" not in line]


# Every case's judge starts two child processes (which hold the batch's stderr), one in
# a session of its own, and sleeps: a signal always finds judges and their children
# running (those of finished judges were killed when their judge ended).
SLOW_EVAL = """\
judges:
  - name: slow
    timeout: 120
    check: |
      import subprocess, sys, time
      sleeper = [sys.executable, "-c", "import time; time.sleep(300)", "{marker}"]
      subprocess.Popen(sleeper)
      subprocess.Popen(sleeper, start_new_session=True)
      time.sleep(0.4 if "quick" in outputs["files"].get("x", "") else 300)
      return True
"""


def slow_batch(tmp_path: Path, quick: int, marker: str) -> tuple[list[str], Path]:
    config = tmp_path / "eval.yaml"
    config.write_text(SLOW_EVAL.format(marker=marker))
    cases = tmp_path / "cases"
    for index in range(40):
        (cases / f"c{index:03d}").mkdir(parents=True)
        (cases / f"c{index:03d}" / "x").write_text("quick" if index < quick else "slow")
    out = tmp_path / "out"
    command = [VERIFIER, "batch", "--config", str(config), "--cases", str(cases), "--out", str(out)]
    return [*command, "-j", "2"], out


@pytest.mark.slow
@pytest.mark.parametrize(("stop", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_batch_keeps_what_finished_and_leaves_no_process(
    tmp_path: Path, stop: signal.Signals, code: int
) -> None:
    marker = f"verifier-test-{os.getpid()}-{stop.name}-{time.monotonic_ns()}"
    command, out = slow_batch(tmp_path, quick=4, marker=marker)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(list(out.glob("*/reward.json"))) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        while len(processes_with(marker)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)  # 2 from each slow judge (a finished judge's are killed with it)
        assert len(processes_with(marker)) == 4
        process.send_signal(stop)
        # communicate() returns only when every holder of the batch's stdout/stderr is gone
        stdout, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == code, stderr
    assert processes_with(marker) == []
    document = json.loads(summary_paths(out, None)[0].read_text())
    assert document["interrupted"] is True and document["stopped_by"] == stop.name
    assert document["count"] == 4 and document["graded"] == 4  # the slow cases never finished
    assert f"INTERRUPTED by {stop.name}" in stdout
    # a rerun resumes: the finished cases are not graded again
    rerun = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while len(processes_with(marker)) < 4 and time.monotonic() < deadline + 30:
            time.sleep(0.05)
        rerun.send_signal(signal.SIGTERM)
        rerun.communicate(timeout=30)
    finally:
        rerun.kill()
    assert rerun.returncode == 143
    again = json.loads(summary_paths(out, None)[0].read_text())
    assert again["resumed"] == 4 and again["graded"] == 0
    assert processes_with(marker) == []


@pytest.mark.slow
def test_a_finished_batch_leaves_no_process_behind(tmp_path: Path) -> None:
    """Judges that start processes in sessions of their own: when the batch ends, they
    are gone, and nothing holds its stdout/stderr (run() would wait for them)."""
    marker = f"verifier-test-{os.getpid()}-done-{time.monotonic_ns()}"
    command, out = slow_batch(tmp_path, quick=40, marker=marker)
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(summary_paths(out, None)[0].read_text())["graded"] == 40
    assert processes_with(marker) == []


KILL_PARENT_EVAL = """judges:
  - name: ok
    check: |
      return True
  - name: parricide
    timeout: 60
    check: |
      import os, signal, time
      if "kill" in outputs["files"].get("x", ""):
          os.kill(os.getppid(), signal.SIGKILL)
          time.sleep(120)  # orphaned: holds the worker's pipes until someone kills it
      return True
"""


def test_a_judge_that_kills_its_worker_is_an_error_row_and_the_batch_goes_on(
    tmp_path: Path,
) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text(KILL_PARENT_EVAL)
    cases = tmp_path / "cases"
    for index in range(12):
        (cases / f"c{index:02d}").mkdir(parents=True)
        (cases / f"c{index:02d}" / "x").write_text("kill" if index in (3, 7) else "fine")
    out = tmp_path / "out"
    started = time.monotonic()
    completed = subprocess.run(
        [
            VERIFIER,
            "batch",
            "--config",
            str(config),
            "--cases",
            str(cases),
            "--out",
            str(out),
            "-j",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert completed.returncode == 0, completed.stderr
    assert time.monotonic() - started < 50  # not the orphaned judges' 120 s, nor their timeout
    document = json.loads(summary_paths(out, None)[0].read_text())
    by_case = {row["case"]: row for row in document["cases"]}
    assert {name for name, row in by_case.items() if row["status"] == "error"} == {"c03", "c07"}
    assert "was killed by SIGKILL" in by_case["c03"]["error"]
    assert document["graded"] == 10


def test_default_jobs_is_at_least_one() -> None:
    assert 1 <= available_cpus() <= len(os.sched_getaffinity(0))
