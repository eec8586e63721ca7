"""`verifier batch --write-back`: a regrade of a Harbor job dir recorded where Harbor reads it.

Harbor's own regrade (harbor/trial/regrade.py) runs the verifier again and records
the trial's new `verifier/` dir and result.json's `verifier_result`; `harbor view`
and Harbor's job metrics read nothing else. After a batch over a job dir, each
rewarded trial gets the same: the four reward files, and a test-stdout.txt saying
what regraded it, replace those in `<trial>/verifier/`, whose earlier files are kept
once in `<trial>/verifier/original/` (the first grading is never lost);
`verifier_result` becomes `{"rewards": <the new reward.json>}`, and an exception
recorded by the verifier phase (no reward file, the verifier's timeout) is moved to
`verifier/original/result.json` with the rest, as Harbor's regrade keeps only the
agent's errors. Then the job's result.json stats (per eval: n_trials, the mean
metric, pass@k, reward_stats, errors) are recomputed from every trial the way
Harbor computes them (harbor/job.py, metrics/base.py, utils/pass_at_k.py).

Multi-step trials are not written back: which step's reward is the trial's is the
task's `multi_step_reward_strategy`, which the trial dir does not record. A trial not
written back (multi-step, not graded, or its files not writable) is named with why,
and the batch exits EXIT_NOT_WRITTEN_BACK: a job that only looks regraded would train
on the old rewards.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from verifier import __version__
from verifier.batch.cases import Case
from verifier.batch.summary import CaseOutcome, CaseStatus
from verifier.errors import OutputError, UsageError
from verifier.output import OUTPUT_FILES, REWARD_JSON, write_atomic

ORIGINAL = "original"  # <trial>/verifier/original/: what Harbor's own grading left
RESULT = "result.json"
TEST_STDOUT = "test-stdout.txt"  # what the viewer shows as the verifier's log


@attrs.frozen
class WriteBack:
    """What --write-back did: trials written, and those that could not be, with why."""

    written: tuple[str, ...]
    refused: tuple[tuple[str, str], ...]  # (trial, why)

    def line(self, job: Path) -> str:
        text = f"wrote back {len(self.written)} trials into {job}"
        if self.refused:
            text += f"; not {len(self.refused)}: " + "; ".join(
                f"{name}: {why}" for name, why in self.refused[:5]
            )
        return text


def check_job(job: Path) -> None:
    """UsageError unless job is a finished Harbor job dir (a running job rewrites its
    own files under Harbor's lock)."""
    try:
        document = json.loads((job / RESULT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UsageError(
            f"--write-back: {job} has no readable {RESULT}: give a Harbor job dir"
        ) from None
    if not isinstance(document, dict) or document.get("finished_at") is None:
        raise UsageError(f"--write-back: the Harbor job in {job} has not finished")


MULTI_STEP = (
    "a multi-step trial: --write-back writes single-step trials only (which step's "
    "reward is the trial's is the task's multi_step_reward_strategy, which the trial "
    "dir does not record); its steps' regrade is in OUT/<trial>/steps/"
)


def write_back(
    job: Path, out: Path, cases: Sequence[Case], outcomes: Iterable[CaseOutcome], config: Path
) -> WriteBack:
    """Each rewarded single-step trial's files from OUT/<trial>/ into the trial; then the
    job's stats. Every other trial among `cases` (this run's entries: a multi-step
    trial, one whose case was not graded, one that cannot be written) is named in
    `refused` with why, never raised."""
    by_name = {outcome.name: outcome for outcome in outcomes}
    written: list[str] = []
    refused: dict[str, str] = {}  # trial -> why, in the order met
    for case in cases:
        outcome = by_name.get(case.name)
        if case.skipped is not None:  # in a job dir, an entry that should be a trial
            refused[case.name] = f"not a trial that can be read: {case.skipped}"
            continue
        if case.step is not None:
            refused[case.name.split("/", 1)[0]] = MULTI_STEP
            continue
        if outcome is None or outcome.status is not CaseStatus.REWARDED:
            why = (outcome.error if outcome else None) or "not graded in this run"
            refused[case.name] = f"no reward: {why}"
            continue
        try:
            _write_trial(job / case.name, out / case.name, _stdout(config, out, outcome))
        except (OSError, ValueError, OutputError) as error:
            refused[case.name] = str(getattr(error, "message", error))
            continue
        written.append(case.name)
    if written:
        try:
            update_job_stats(job)
        except (OSError, ValueError, OutputError) as error:
            refused[job.name] = f"the job's {RESULT}: {error}"
    return WriteBack(tuple(written), tuple(refused.items()))


def _stdout(config: Path, out: Path, outcome: CaseOutcome) -> str:
    """test-stdout.txt of a written-back trial: what the viewer shows as its log."""
    return (
        f"regraded by `verifier batch --write-back` (harbor-verifier {__version__})\n"
        f"config: {config}\nfiles: {out / outcome.name}\nreward: {outcome.reward!r}\n"
        f"errored judges: {', '.join(outcome.errored_judges) or 'none'}\n"
        f"Harbor's own grading of this trial: {ORIGINAL}/\n"
    )


def _write_trial(trial: Path, graded: Path, stdout: str) -> None:
    result_path = trial / RESULT
    result = json.loads(result_path.read_text(encoding="utf-8"))
    if not isinstance(result, dict):
        raise ValueError(f"{result_path} is not a trial result")
    rewards = json.loads((graded / REWARD_JSON).read_text(encoding="utf-8"))
    verifier = trial / "verifier"
    original = verifier / ORIGINAL
    if not original.exists():  # the first write-back keeps what Harbor's grading left
        original.mkdir(parents=True)
        for entry in list(verifier.iterdir()):
            if entry.name != ORIGINAL:
                entry.rename(original / entry.name)
        shutil.copy2(result_path, original / RESULT)
    for name in OUTPUT_FILES:  # ctrf.json only when a judge read a test report
        if (graded / name).is_file():
            write_atomic(verifier / name, (graded / name).read_text(encoding="utf-8"))
        else:
            (verifier / name).unlink(missing_ok=True)
    write_atomic(verifier / TEST_STDOUT, stdout)
    result["verifier_result"] = {"rewards": rewards}
    if _from_the_verifier(result):
        result["exception_info"] = None
    write_atomic(result_path, json.dumps(result, indent=4) + "\n")


def _from_the_verifier(result: Mapping[str, Any]) -> bool:
    """The trial's exception happened in its verifier phase (Harbor's regrade drops those:
    `_source_agent_exception`, an exception no earlier than the verifier's start)."""
    exception = result.get("exception_info")
    started = (result.get("verifier") or {}).get("started_at")
    if not isinstance(exception, dict) or not started:
        return False
    try:
        return _when(exception.get("occurred_at")) >= _when(started)
    except (TypeError, ValueError):
        return False


def _when(text: Any) -> datetime:
    return datetime.fromisoformat(str(text))


# --- the job's stats, as Harbor computes them -------------------------------------------


def update_job_stats(job: Path) -> None:
    """Recompute the stats of job/result.json from every trial's result.json."""
    path = job / RESULT
    document = json.loads(path.read_text(encoding="utf-8"))
    trials = []
    for entry in sorted(job.iterdir()):
        trial_result = entry / RESULT
        if entry.is_dir() and trial_result.is_file():
            trials.append(json.loads(trial_result.read_text(encoding="utf-8")))
    stats = document.setdefault("stats", {})
    evals = stats.setdefault("evals", {})
    groups: dict[str, list[dict[str, Any]]] = {}
    for trial in trials:
        groups.setdefault(_evals_key(trial), []).append(trial)
    errored = 0
    for key, members in groups.items():
        entry = evals.setdefault(key, {})
        valid = [trial for trial in members if _reward_valid(trial)]
        rewards = [trial["verifier_result"]["rewards"] for trial in valid]
        entry["n_trials"] = len(valid)
        exceptions: dict[str, list[str]] = {}
        for trial in members:
            for kind in _exception_types(trial):
                exceptions.setdefault(kind, []).append(trial["trial_name"])
        entry["n_errors"] = sum(1 for trial in members if _exception_types(trial))
        errored += entry["n_errors"]
        entry["exception_stats"] = exceptions
        entry["reward_stats"] = _reward_stats(valid)
        if _default_metrics(entry.get("metrics")):
            entry["metrics"] = [mean_metric(rewards)] if rewards else []
        entry["pass_at_k"] = {str(k): value for k, value in harbor_pass_at_k(valid).items()}
    stats["n_errored_trials"] = errored
    write_atomic(path, json.dumps(document, indent=4) + "\n")


def _evals_key(trial: Mapping[str, Any]) -> str:
    """harbor JobStats.format_agent_evals_key: agent__model__dataset (model when known)."""
    agent = trial.get("agent_info") or {}
    model = (agent.get("model_info") or {}).get("name")
    dataset = trial.get("source") or "adhoc"
    parts = [str(agent.get("name")), *([str(model)] if model else []), str(dataset)]
    return "__".join(parts)


def _exception_types(trial: Mapping[str, Any]) -> set[str]:
    found = [trial.get("exception_info")]
    found += [step.get("exception_info") for step in trial.get("step_results") or ()]
    return {str(item["exception_type"]) for item in found if isinstance(item, dict)}


# The exceptions after which Harbor still counts the reward (harbor/models/trial/
# error_policy.py, has_valid_reward=True): the agent stopped, its work is graded.
VALID_REWARD_EXCEPTIONS = frozenset(
    {
        "NonZeroAgentExitCodeError",
        "AgentTimeoutError",
        "ContextWindowExceededError",
        "OutputTokenExceededError",
        "ContextLengthExceededError",
        "OutputLengthExceededError",
        "AgentSafetyRefusalError",
        "ContentPolicyViolationError",
    }
)


def _reward_valid(trial: Mapping[str, Any]) -> bool:
    """harbor TrialResult.reward_valid: rewards, and no recorded exception whose policy
    voids them (an exception type Harbor's table does not list counts as voiding here,
    where Harbor's default keeps the reward; a policy override is not seen)."""
    verifier = trial.get("verifier_result")
    if not isinstance(verifier, dict) or not verifier.get("rewards"):
        return False
    return _exception_types(trial) <= VALID_REWARD_EXCEPTIONS


def _reward_stats(trials: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, list[str]]]:
    stats: dict[str, dict[str, list[str]]] = {}
    for trial in trials:
        for key, value in trial["verifier_result"]["rewards"].items():
            stats.setdefault(key, {}).setdefault(str(value), []).append(trial["trial_name"])
    return stats


def _default_metrics(metrics: Any) -> bool:
    """Harbor's default metric (one Mean) or none yet: what this module can recompute.
    A job with its own metrics (uv scripts) keeps them as Harbor computed them."""
    return metrics in (None, []) or (isinstance(metrics, list) and len(metrics) == 1)


def mean_metric(rewards: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """harbor metrics/base.py aggregate_reward_dicts with the mean: one key -> {"mean": m};
    several -> a mean per key, a key absent from a trial counted as 0."""
    keys = sorted({key for reward in rewards for key in reward})
    if len(keys) <= 1:
        values = [next(iter(reward.values()), 0) for reward in rewards]
        return {"mean": sum(values) / len(values)}
    return {key: sum(reward.get(key, 0) for reward in rewards) / len(rewards) for key in keys}


def harbor_pass_at_k(trials: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """harbor utils/pass_at_k.py: only when every trial has one reward key valued 0 or 1."""
    from verifier.batch.report import eligible_k, pass_at_k

    successes: dict[str, list[int]] = {}
    for trial in trials:
        rewards = trial["verifier_result"]["rewards"]
        if len(rewards) != 1:
            return {}
        (value,) = rewards.values()
        if value not in (0, 1) or isinstance(value, bool):
            return {}
        successes.setdefault(str(trial.get("task_name")), []).append(int(value))
    if not successes:
        return {}
    fewest = min(len(values) for values in successes.values())
    return {
        k: sum(pass_at_k(len(v), sum(v), k) for v in successes.values()) / len(successes)
        for k in eligible_k(fewest)
    }
