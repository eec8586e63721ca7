"""The job report of a batch over a Harbor job dir: what an RL team asks of a rollout set.

Per task (its attempts are the job's trials of that task): the mean reward, the
spread across attempts, and whether they all scored the same, which gives GRPO no
signal (every advantage is zero). For the job: the share of such task groups,
pass@k (success: a reward of 1, the estimator Harbor uses, for any reward, not only
pass/fail ones), max@k (the expected best reward of k attempts, the continuous
pass@k) and avg@k (the expected mean of k attempts: the mean over attempts, for
every k), and how much each judge moves the reward: the mean change of the reward
when the judge is left out (composed again as if it had been skipped: a weighted
reward renormalizes without it, a gate no longer zeroes, a formula naming it
degrades to 0) and the correlation of its value with the reward across trials.
Harbor, rewardkit and agent-eval-harness report none of these.

Everything is computed from the cases' judges.json under --out (resumed cases too),
with the eval.yaml the batch graded with. Arithmetic only: pure functions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from verifier.batch.cases import Case
from verifier.batch.summary import CaseOutcome, CaseStatus
from verifier.grading import LoadedEval, step_plan
from verifier.output import JUDGES_JSON
from verifier.results import JudgeResult, Status
from verifier.reward import compose

REPORT = "report.json"  # OUT/.batch/report.json
_SAME = 1e-9  # rewards closer than this are the same score


@attrs.frozen
class TaskFigures:
    task: str
    attempts: int
    mean: float
    spread: float  # population standard deviation across attempts
    low: float
    high: float

    @property
    def uniform(self) -> bool:
        """Every attempt scored the same: no GRPO signal (needs two attempts to say)."""
        return self.attempts > 1 and self.high - self.low <= _SAME


@attrs.frozen
class JudgeInfluence:
    judge: str
    trials: int  # trials where it was graded
    shift: float  # mean of (reward - reward without the judge)
    moved: float  # share of trials whose reward changes without it
    correlation: float | None  # of its value with the reward; None when either is constant


@attrs.frozen
class JobReport:
    tasks: tuple[TaskFigures, ...]
    trials: int
    mean_reward: float | None
    uniform_share: float | None  # of the tasks with two attempts or more
    pass_at_k: Mapping[int, float]
    max_at_k: Mapping[int, float]
    avg_at_k: float | None
    judges: tuple[JudgeInfluence, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "trials": self.trials,
            "tasks": len(self.tasks),
            "mean_reward": self.mean_reward,
            "uniform_task_share": self.uniform_share,
            "pass_at_k": {str(k): v for k, v in self.pass_at_k.items()},
            "max_at_k": {str(k): v for k, v in self.max_at_k.items()},
            "avg_at_k": self.avg_at_k,
            "per_task": [
                {**attrs.asdict(figures, recurse=False), "uniform": figures.uniform}
                for figures in self.tasks
            ],
            "judges": [attrs.asdict(influence, recurse=False) for influence in self.judges],
        }

    def lines(self) -> list[str]:
        """The report as stdout shows it."""
        if not self.trials:
            return ["report: no rewarded trial"]

        def at_k(figures: Mapping[int, float]) -> str:
            return " ".join(f"@{k}={value:.3f}" for k, value in figures.items()) or "n/a"

        uniform = "n/a" if self.uniform_share is None else f"{self.uniform_share:.3f}"
        lines = [
            (
                f"report: trials={self.trials} tasks={len(self.tasks)} "
                f"mean_reward={self.mean_reward:.4f} uniform_tasks={uniform} (no GRPO signal)"
            ),
            (
                f"report: pass {at_k(self.pass_at_k)}; max {at_k(self.max_at_k)}; "
                f"avg@k={self.avg_at_k:.4f}"
            ),
        ]
        for figures in self.tasks:
            same = " all the same" if figures.uniform else ""
            lines.append(
                f"report: task {figures.task}: {figures.attempts} attempts, mean "
                f"{figures.mean:.4f}, spread {figures.spread:.4f} "
                f"[{figures.low:.4f}, {figures.high:.4f}]{same}"
            )
        for judge in self.judges:
            correlation = "n/a" if judge.correlation is None else f"{judge.correlation:+.3f}"
            lines.append(
                f"report: judge {judge.judge}: reward {judge.shift:+.4f} with it on average, "
                f"moved in {judge.moved:.0%} of trials, correlation {correlation}"
            )
        return lines


def job_report(
    loaded: LoadedEval, out: Path, cases: Sequence[Case], outcomes: Sequence[CaseOutcome]
) -> JobReport:
    """The report of every rewarded case (one Harbor trial, or one step of one)."""
    by_name = {case.name: case for case in cases}
    groups: dict[str, list[float]] = {}
    influence: dict[str, list[tuple[float, float, float | None]]] = {}
    for outcome in outcomes:
        case = by_name.get(outcome.name)
        if case is None or outcome.status is not CaseStatus.REWARDED or outcome.reward is None:
            continue
        groups.setdefault(_task(case), []).append(outcome.reward)
        results = _results(out / outcome.name / JUDGES_JSON)
        for judge, (shift, value) in judge_shifts(loaded, results, outcome.reward, case).items():
            influence.setdefault(judge, []).append((outcome.reward, shift, value))
    tasks = tuple(task_figures(task, rewards) for task, rewards in sorted(groups.items()))
    rewards = [reward for values in groups.values() for reward in values]
    repeated = [figures for figures in tasks if figures.attempts > 1]
    fewest = min((len(values) for values in groups.values()), default=0)
    ks = eligible_k(fewest)
    return JobReport(
        tasks=tasks,
        trials=len(rewards),
        mean_reward=math.fsum(rewards) / len(rewards) if rewards else None,
        uniform_share=(
            sum(figures.uniform for figures in repeated) / len(repeated) if repeated else None
        ),
        pass_at_k={
            k: _mean([pass_at_k(len(v), _successes(v), k) for v in groups.values()]) for k in ks
        },
        max_at_k={k: _mean([max_at_k(v, k) for v in groups.values()]) for k in ks},
        avg_at_k=_mean([_mean(values) for values in groups.values()]) if groups else None,
        judges=tuple(_influence(judge, rows) for judge, rows in influence.items() if rows),
    )


def _task(case: Case) -> str:
    return case.case_id if case.step is None else f"{case.case_id}/steps/{case.step}"


def _results(path: Path) -> list[JudgeResult]:
    """The judges' results as judges.json records them ([] when it cannot be read)."""
    try:
        per_judge = json.loads(path.read_text(encoding="utf-8"))["per_judge"]
        return [
            JudgeResult(
                name,
                str(record.get("judge_type")),
                Status(record["status"]),
                value=record.get("value"),
            )
            for name, record in per_judge.items()
        ]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


def judge_shifts(
    loaded: LoadedEval, results: Sequence[JudgeResult], reward: float, case: Case
) -> dict[str, tuple[float, float | None]]:
    """For each judge: (reward - the reward composed without it, its value as a number)."""
    config = loaded.config
    plan = step_plan(loaded, case.step if config.step_ids else None)
    shifts = {}
    for result in results:
        others = [
            other
            if other.name != result.name
            else attrs.evolve(other, status=Status.SKIPPED, value=None)
            for other in results
        ]
        without = compose(plan.reward, others, config.scales()).reward
        value = None if result.value is None else float(result.value)
        shifts[result.name] = (reward - without, value)
    return shifts


def _influence(judge: str, rows: Sequence[tuple[float, float, float | None]]) -> JudgeInfluence:
    rewards = [reward for reward, _, value in rows if value is not None]
    values = [value for _, _, value in rows if value is not None]
    return JudgeInfluence(
        judge=judge,
        trials=len(rows),
        shift=_mean([shift for _, shift, _ in rows]),
        moved=sum(1 for _, shift, _ in rows if abs(shift) > _SAME) / len(rows),
        correlation=correlation(values, rewards),
    )


# --- arithmetic --------------------------------------------------------------------------


def task_figures(task: str, rewards: Sequence[float]) -> TaskFigures:
    mean = _mean(rewards)
    spread = math.sqrt(_mean([(reward - mean) ** 2 for reward in rewards]))
    return TaskFigures(task, len(rewards), mean, spread, min(rewards), max(rewards))


def eligible_k(attempts: int) -> list[int]:
    """Harbor's k values (utils/pass_at_k.py): 2, 4, 8, ... and 5, 10, 15, ... up to
    the fewest attempts of any task."""
    ks = set()
    k = 2
    while k <= attempts:
        ks.add(k)
        k *= 2
    ks.update(range(5, attempts + 1, 5))
    return sorted(ks)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator of pass@k from n attempts with c successes (Chen et al.
    2021; Harbor's `_pass_at_k_for_task`)."""
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(k):
        product *= (n - c - i) / (n - i)
    return 1.0 - product


def max_at_k(rewards: Sequence[float], k: int) -> float:
    """The expected best of k attempts drawn without replacement from the n recorded:
    the i-th smallest reward is the best of a k-subset in C(i-1, k-1) of the C(n, k)."""
    ordered = sorted(rewards)
    n = len(ordered)
    total = math.comb(n, k)
    return math.fsum(ordered[i] * math.comb(i, k - 1) for i in range(k - 1, n)) / total


def correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r; None with fewer than two points or a constant side."""
    if len(xs) < 2:
        return None
    mx, my = _mean(xs), _mean(ys)
    sx = math.fsum((x - mx) ** 2 for x in xs)
    sy = math.fsum((y - my) ** 2 for y in ys)
    if sx <= 0 or sy <= 0:
        return None
    return math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / math.sqrt(sx * sy)


def _successes(rewards: Sequence[float]) -> int:
    return sum(1 for reward in rewards if reward >= 1.0 - _SAME)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0
