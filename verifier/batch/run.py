"""A batch from start to finish: load, list the cases, grade them in workers, summarise.

The config is loaded here, in the parent, before the pool forks its workers and its
LLM stage: that is what they share. The batch holds the lock of its --out for the
whole run (verifier.batch.layout).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import IO

from verifier.batch.cases import Case, Shard, discover_cases, select_cases
from verifier.batch.grader import CaseGrader, config_hash, llm_judges
from verifier.batch.layout import batch_lock, default_llm_cache
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
from verifier.engine import Limits
from verifier.grading import command_sandbox, load_eval
from verifier.judges.base import Pool
from verifier.named import NamedTuple
from verifier.options import DEFAULT_LLM_CACHE_MB, DEFAULT_LLM_CONCURRENCY, Options
from verifier.output import prepare_out_dir
from verifier.processes import make_undumpable
from verifier.system import available_cpus


class BatchRequest(NamedTuple):
    """What `verifier batch` was asked to do (the CLI options, parsed)."""

    config: Path
    cases: Path
    out: Path
    jobs: int
    shard: Shard | None = None
    force: bool = False
    keep_errors: bool = False
    limits: Limits = Limits()
    llm_concurrency: int = DEFAULT_LLM_CONCURRENCY
    llm_cache: Path | None = None  # None: no cache
    llm_cache_mb: int = DEFAULT_LLM_CACHE_MB
    weak_sandbox: bool = False  # run code from the case even where the sandbox is weak
    progress: IO[str] | None = None

    @classmethod
    def from_options(cls, options: Options) -> BatchRequest:
        """A case's CPU judges run one at a time here (LLM judges go to the LLM stage):
        the workers already fill the CPUs, side by side measured no faster on 2 cores,
        and on a 64-CPU node it would mean thousands of judge processes at once."""
        assert options.cases is not None
        cache = (
            None if options.no_llm_cache else options.llm_cache or default_llm_cache(options.out)
        )
        return cls(
            config=options.config,
            cases=options.cases,
            out=options.out,
            jobs=options.jobs or available_cpus(),
            shard=Shard(*options.shard) if options.shard else None,
            force=options.force,
            keep_errors=options.keep_errors,
            limits=Limits.from_options(options, parallel=1),
            llm_concurrency=options.llm_concurrency,
            llm_cache=cache,
            llm_cache_mb=options.llm_cache_mb,
            weak_sandbox=options.weak_sandbox,
        )


def run_batch(request: BatchRequest) -> BatchSummary:
    """Load once, list the cases, grade them in workers, write the summary files.

    The parent is not dumpable (nor, being its forks, are its workers and LLM stage):
    code from a case running as the same UID cannot open their pipes through /proc."""
    started = time.monotonic()
    make_undumpable()
    loaded = load_eval(request.config)
    stream = request.progress if request.progress is not None else sys.stderr
    warn_all(loaded.config.warnings, stream)
    llm = llm_judges(loaded, request.limits)
    digest = config_hash(request.config, request.limits, llm)
    prepare_out_dir(request.out, remove=())
    with batch_lock(request.out, request.shard):
        entries = select_cases(discover_cases(request.cases, request.out), request.shard)
        cases = [entry for entry in entries if entry.skipped is None]
        grader = CaseGrader(
            loaded, request.limits, request.out, digest, request.force, request.keep_errors, llm
        )
        plan = _llm_plan(request, grader) if llm else None
        progress = Progress(len(cases), stream)
        hidden = (request.cases, request.out, request.llm_cache)
        slots = min(request.jobs, max(len(cases), 1))
        lanes = request.limits.capacity(Pool.CPU)
        with command_sandbox(loaded, hidden, accept_weak=request.weak_sandbox, slots=slots,
                             lanes=lanes):  # fmt: skip
            result = run_pool(cases, grader, request.jobs, progress.update, plan)
        progress.close()
        os.sync()  # the cases' files, written without a flush each, reach the disk together
        figures = None
        if plan is not None:
            figures = LLMFigures.tally(
                request.llm_concurrency, request.llm_cache, result.spends, result.endpoints
            )
        summary = BatchSummary(
            config=request.config,
            config_hash=digest,
            cases_dir=request.cases,
            shard=request.shard,
            outcomes=tuple(_row(entry, result.outcomes) for entry in entries if
                           entry.skipped is not None or entry.name in result.outcomes),
            elapsed_s=time.monotonic() - started,
            stopped_by=signal.Signals(result.stopped_by).name if result.stopped_by else None,
            llm=figures,
        )  # fmt: skip
        write_summary(request.out, summary)
    return summary


def _row(entry: Case, outcomes: dict[str, CaseOutcome]) -> CaseOutcome:
    if entry.skipped is not None:
        return CaseOutcome(entry.name, CaseStatus.SKIPPED, error=entry.skipped)
    return outcomes[entry.name]


def _llm_plan(request: BatchRequest, grader: CaseGrader) -> LLMPlan:
    from verifier.batch.llm import LLMSettings
    from verifier.judges.llm.cache import ResponseCache

    cache = None
    if request.llm_cache is not None:
        cache = ResponseCache.create(request.llm_cache, request.llm_cache_mb)
    judges = {index: grader.loaded.judges[index] for index in grader.llm}
    endpoints = {judge.endpoint.url for judge in grader.llm.values()}
    return LLMPlan(
        judges=judges,
        settings=LLMSettings(request.llm_concurrency, cache),
        endpoints=len(endpoints),
        finish=grader.finish,
    )
