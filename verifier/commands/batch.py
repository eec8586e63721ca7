"""`verifier batch`: grade, print the summary line and where it was written."""

from __future__ import annotations

from pathlib import Path

import attrs

from verifier.batch import BatchRequest, Shard, run_batch, summary_paths
from verifier.batch.layout import default_llm_cache, report_path
from verifier.console import warn, write_termination_message
from verifier.defaults import DEFAULT_LLM_PARALLEL
from verifier.engine import Limits
from verifier.errors import (
    EXIT_BUDGET,
    EXIT_DISAGREES,
    EXIT_INTERRUPTED,
    EXIT_NOT_WRITTEN_BACK,
    EXIT_OK,
    EXIT_TERMINATED,
)
from verifier.parsers import RewardKeys
from verifier.system import available_cpus

_EXIT_BY_SIGNAL = {"SIGTERM": EXIT_TERMINATED, "SIGINT": EXIT_INTERRUPTED}


@attrs.frozen
class BatchArgs:
    """What `verifier batch` was given (verifier.cli.options: its flags, variables and
    defaults, all applied)."""

    cases: Path
    out: Path
    config: Path
    jobs: int | None
    shard: tuple[int, int] | None
    force: bool
    keep_errors: bool
    reward_keys: RewardKeys
    deadline: float | None
    write_back: bool
    memory_mb: int
    llm_concurrency: int
    no_llm: bool
    llm_cache: Path | None
    no_llm_cache: bool
    llm_cache_mb: int
    max_cost_usd: float | None
    budget_id: str | None
    calibrate: bool
    labels: Path | None
    min_agreement: float | None
    termination_log: Path | None
    weak_sandbox: bool


def batch_request(args: BatchArgs) -> BatchRequest:
    """The pipeline's request. A case's CPU judges run one at a time here (LLM judges go
    to the LLM stage): the workers already fill the CPUs, so side by side they would add
    processes, not throughput: on a 64-CPU node, thousands of judge processes at once."""
    cache = None if args.no_llm_cache else args.llm_cache or default_llm_cache(args.out)
    jobs = args.jobs or available_cpus()
    return BatchRequest(
        config=args.config,
        cases=args.cases,
        out=args.out,
        jobs=jobs,
        shard=Shard(*args.shard) if args.shard else None,
        force=args.force,
        keep_errors=args.keep_errors,
        limits=Limits.asked(
            args.memory_mb, DEFAULT_LLM_PARALLEL, args.no_llm, workers=jobs, parallel=1
        ),
        llm_concurrency=args.llm_concurrency,
        llm_cache=cache,
        llm_cache_mb=args.llm_cache_mb,
        reward_keys=args.reward_keys,
        deadline_s=args.deadline,
        write_back=args.write_back,
        max_cost_usd=args.max_cost_usd,
        budget_id=args.budget_id,
        calibrate=args.calibrate or args.labels is not None or args.min_agreement is not None,
        labels=args.labels,
        min_agreement=args.min_agreement,
        weak_sandbox=args.weak_sandbox,
    )


def run(args: BatchArgs) -> int:
    """Case errors do not fail the command (they are rows in the summary): in a
    Kubernetes Job a non-zero exit would re-run the whole shard for one bad case.
    A batch stopped by SIGTERM (SIGINT) exits 143 (130) after writing the summary of
    the cases it finished; a rerun resumes the rest. One whose --max-cost-usd was spent
    before every case was graded exits 8, with the summary of what it graded; one
    whose --min-agreement a labelled judge does not reach exits 7; one whose
    --write-back left a trial of the job as it was exits 12."""
    request = batch_request(args)
    summary = run_batch(request)
    print(f"batch: {summary.line()}")
    calibration = summary.calibration
    for line in calibration.lines() if calibration is not None else ():
        print(line)
    for path in summary_paths(request.out, request.shard):
        print(f"wrote {path}")
    if summary.report is not None:
        print("\n".join(summary.report.lines()))
        print(f"wrote {report_path(request.out, request.shard)}")
    if summary.written_back is not None:
        print(f"batch: {summary.written_back.line(request.cases)}")
    write_termination_message(args.termination_log, summary.line())
    if summary.stopped_by is not None:
        return _EXIT_BY_SIGNAL.get(summary.stopped_by, EXIT_OK)
    if summary.budget is not None and summary.budget.exhausted:
        hint = summary.budget.hint()
        if hint is not None:
            warn(hint)
        return EXIT_BUDGET
    if calibration is not None and calibration.failing:
        return EXIT_DISAGREES
    if summary.written_back is not None and summary.written_back.refused:
        return EXIT_NOT_WRITTEN_BACK
    return EXIT_OK
