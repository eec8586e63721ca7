"""A batch from start to finish: load, list the cases, grade them in workers, summarise.

The config is loaded here, in the parent, before the pool forks its workers and its
LLM stage: that is what they share. The batch holds the lock of its --out for the
whole run (verifier.batch.layout).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

import attrs

from verifier.batch.budget import Purse, open_purse
from verifier.batch.calibrate import calibrate, read_labels
from verifier.batch.cases import Case, Shard, discover_cases, is_harbor_job, select_cases
from verifier.batch.grader import CaseGrader, config_hash, llm_judges
from verifier.batch.layout import (
    account_name,
    batch_lock,
    budget_path,
    report_path,
)
from verifier.batch.pool import LLMPlan, run_pool
from verifier.batch.summary import (
    BatchSummary,
    CaseOutcome,
    CaseStatus,
    LLMFigures,
    Progress,
    write_summary,
)
from verifier.console import warn_all
from verifier.defaults import DEFAULT_LLM_CACHE_MB, DEFAULT_LLM_CONCURRENCY
from verifier.engine import Limits
from verifier.errors import UsageError
from verifier.grading import (
    LoadedEval,
    check_reward_keys,
    command_sandbox,
    load_eval,
    refuse_cache_inside_case,
)
from verifier.judges.base import Pool
from verifier.linux import make_undumpable
from verifier.output import prepare_out_dir, write_atomic
from verifier.parsers import ALL_REWARD_KEYS, RewardKeys

if TYPE_CHECKING:
    from verifier.judges.llm.judge import LLMJudge


@attrs.frozen
class BatchRequest:
    """What `verifier batch` was asked to do (the CLI options, parsed)."""

    config: Path
    cases: Path
    out: Path
    jobs: int
    shard: Shard | None = None
    force: bool = False
    keep_errors: bool = False
    limits: Limits = attrs.Factory(Limits)
    llm_concurrency: int = DEFAULT_LLM_CONCURRENCY
    llm_cache: Path | None = None  # None: no cache
    llm_cache_mb: int = DEFAULT_LLM_CACHE_MB
    reward_keys: RewardKeys = ALL_REWARD_KEYS
    deadline_s: float | None = None  # each case's whole grade (--deadline)
    write_back: bool = False
    max_cost_usd: float | None = None  # --max-cost-usd
    budget_id: str | None = None  # --budget-id (None: `default` for a shard, else its own)
    calibrate: bool = False  # --calibrate (also implied by --labels and --min-agreement)
    labels: Path | None = None
    min_agreement: float | None = None
    weak_sandbox: bool = False  # run code from the case even where the sandbox is weak
    progress: IO[str] | None = None


def run_batch(request: BatchRequest) -> BatchSummary:
    """Load once, list the cases, grade them in workers, write the summary files.

    The parent is not dumpable (nor, being its forks, are its workers and LLM stage):
    code from a case running as the same UID cannot open their pipes through /proc."""
    started = time.monotonic()
    make_undumpable()
    loaded = load_eval(request.config)
    check_reward_keys(loaded.config, request.reward_keys)
    harbor_job = is_harbor_job(request.cases)
    if request.write_back:
        from verifier.batch.writeback import check_job

        if not harbor_job:
            raise UsageError(f"--write-back: {request.cases} is not a Harbor job dir")
        check_job(request.cases)
    stream = request.progress if request.progress is not None else sys.stderr
    warn_all(loaded.config.warnings, stream)
    llm = llm_judges(loaded, request.limits)
    if request.max_cost_usd is not None:
        _refuse_unpriced(llm)
    digest = config_hash(request.config, request.limits, llm, request.reward_keys)
    prepare_out_dir(request.out, remove=())
    with batch_lock(request.out, request.shard):
        entries = select_cases(discover_cases(request.cases, request.out), request.shard)
        cases = [entry for entry in entries if entry.skipped is None]
        labels = read_labels(request.labels, loaded.config, cases) if request.calibrate else None
        grader = CaseGrader(
            loaded,
            request.limits,
            request.out,
            digest,
            request.force,
            request.keep_errors,
            llm,
            request.reward_keys,
            request.deadline_s,
        )
        purse = _purse(request) if request.max_cost_usd is not None else None
        plan = _llm_plan(request, grader, purse) if llm else None
        progress = Progress(len(cases), stream)
        hidden = (request.cases, request.out, request.llm_cache, request.labels)
        slots = min(request.jobs, max(len(cases), 1))
        lanes = request.limits.capacity(Pool.CPU)
        with command_sandbox(
            loaded, hidden, accept_weak=request.weak_sandbox, slots=slots, lanes=lanes
        ) as sandbox:
            sandboxed = attrs.evolve(grader, sandbox=sandbox)
            result = run_pool(cases, sandboxed.for_slot, request.jobs, progress.update, plan)
        progress.close()
        os.sync()  # the cases' files, written without a flush each, reach the disk together
        figures = None
        if plan is not None:
            figures = LLMFigures.tally(
                request.llm_concurrency, request.llm_cache, result.spends, result.endpoints
            )
        budget = purse.figures(result.not_started) if purse is not None else None
        outcomes = tuple(
            _row(entry, result.outcomes)
            for entry in entries
            if entry.skipped is not None or entry.name in result.outcomes
        )
        calibration = None
        if labels is not None:
            origins = {loaded.judges[i].config.name: _origin(judge) for i, judge in llm.items()}
            calibration = calibrate(
                loaded.config, labels, request.out, outcomes, origins, request.min_agreement
            )
        summary = BatchSummary(
            config=request.config,
            config_hash=digest,
            cases_dir=request.cases,
            shard=request.shard,
            outcomes=outcomes,
            elapsed_s=time.monotonic() - started,
            stopped_by=signal.Signals(result.stopped_by).name if result.stopped_by else None,
            llm=figures,
            budget=budget,
            calibration=calibration,
        )
        write_summary(request.out, summary)
        if harbor_job and not summary.interrupted:
            summary = _harbor_results(request, loaded, entries, summary)
    return summary


def _harbor_results(
    request: BatchRequest, loaded: LoadedEval, entries: list[Case], summary: BatchSummary
) -> BatchSummary:
    """A batch over a Harbor job dir: its job report, and --write-back into the trials."""
    from verifier.batch.report import job_report

    report = job_report(loaded, request.out, entries, summary.outcomes)
    text = json.dumps(report.to_json(), indent=2, allow_nan=False) + "\n"
    write_atomic(report_path(request.out, request.shard), text)
    summary = attrs.evolve(summary, report=report)
    if request.write_back:
        from verifier.batch.writeback import write_back

        written = write_back(request.cases, request.out, entries, summary.outcomes, request.config)
        summary = attrs.evolve(summary, written_back=written)
    return summary


def _row(entry: Case, outcomes: dict[str, CaseOutcome]) -> CaseOutcome:
    if entry.skipped is not None:
        return CaseOutcome(entry.name, CaseStatus.SKIPPED, error=entry.skipped)
    return outcomes[entry.name]


def _purse(request: BatchRequest) -> Purse:
    """The batch's budget: a shard's (or a named one's) shared through a ledger in OUT."""
    assert request.max_cost_usd is not None
    shared = None
    if request.shard is not None or request.budget_id is not None:
        budget_id = request.budget_id or "default"
        shared = (budget_path(request.out, budget_id), budget_id)
    holder = account_name(request.shard)
    return open_purse(request.max_cost_usd, shared, holder, exclusive=request.shard is None)


def _llm_plan(request: BatchRequest, grader: CaseGrader, purse: Purse | None) -> LLMPlan:
    from verifier.batch.llm_stage import LLMSettings
    from verifier.judges.llm.cache import ResponseCache

    cache = None
    if request.llm_cache is not None:
        refuse_cache_in_a_case(request.llm_cache, request.cases, request.out)
        cache = ResponseCache.create(request.llm_cache, request.llm_cache_mb)
    judges = {index: grader.loaded.judges[index] for index in grader.llm}
    endpoints = {member.url for judge in grader.llm.values() for member in judge.members}
    return LLMPlan(
        judges=judges,
        settings=LLMSettings(request.llm_concurrency, cache),
        endpoints=len(endpoints),
        finish=grader.finish,
        purse=purse,
    )


def refuse_cache_in_a_case(cache: Path, cases: Path, out: Path) -> None:
    """UsageError when the answer cache lies inside one of the cases (a dir under --cases
    other than --out and the hidden ones, which are never cases): that case's agent
    could plant passing answers in it (grading.refuse_cache_inside_case)."""
    real = Path(os.path.realpath(cache))
    root = Path(os.path.realpath(cases))
    if real.is_relative_to(os.path.realpath(out)) or not real.is_relative_to(root):
        return
    parts = real.relative_to(root).parts
    if parts and not parts[0].startswith("."):
        refuse_cache_inside_case(cache, root / parts[0])


def _origin(judge: LLMJudge) -> dict[str, str]:
    """What the calibration report names of an LLM judge: which model, which prompt."""
    origin = judge.origin()
    return {
        "model": origin["model"],
        "provider": origin["provider"],
        "prompt_sha256": judge.prompt_sha256,
    }


def _refuse_unpriced(judges: Mapping[int, LLMJudge]) -> None:
    """A budget cannot be kept by models whose tokens have no price: exit 2 before any case."""
    unpriced = sorted(
        {
            endpoint.model
            for judge in judges.values()
            for endpoint, price in zip(judge.members, judge.prices, strict=True)
            if price is None
        }
    )
    if unpriced:
        raise UsageError(
            f"--max-cost-usd: no price for model {', '.join(unpriced)}; set one in the judge's "
            "prices: (eval.yaml) or in the file $VERIFIER_LLM_PRICES names"
        )
