"""A batch from start to finish: load, list the cases, grade them in workers, summarise.

The config is loaded here, in the parent, before the pool forks its workers: that
is what the workers share.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import IO, NamedTuple

from verifier.batch.cases import Shard, discover_cases, select_cases
from verifier.batch.grader import CaseGrader, config_hash
from verifier.batch.pool import run_pool
from verifier.batch.summary import BatchSummary, Progress, write_summary
from verifier.console import warn_all
from verifier.engine import Limits
from verifier.grading import load_eval
from verifier.options import Options
from verifier.output import prepare_out_dir
from verifier.system import available_cpus


class BatchRequest(NamedTuple):
    """What `verifier batch` was asked to do (the CLI options, parsed)."""

    config: Path
    cases: Path
    out: Path
    jobs: int
    shard: Shard | None = None
    force: bool = False
    limits: Limits = Limits()
    progress: IO[str] | None = None

    @classmethod
    def from_options(cls, options: Options) -> BatchRequest:
        """A case's CPU judges run one at a time here (LLM judges keep their own pool):
        the workers already fill the CPUs, side by side measured no faster on 2 cores,
        and on a 64-CPU node it would mean thousands of judge processes at once."""
        assert options.cases is not None
        return cls(
            config=options.config,
            cases=options.cases,
            out=options.out,
            jobs=options.jobs or available_cpus(),
            shard=Shard(*options.shard) if options.shard else None,
            force=options.force,
            limits=Limits.from_options(options, parallel=1),
        )


def run_batch(request: BatchRequest) -> BatchSummary:
    """Load once, list the cases, grade them in workers, write the summary files."""
    started = time.monotonic()
    loaded = load_eval(request.config)
    stream = request.progress if request.progress is not None else sys.stderr
    warn_all(loaded.config.warnings, stream)
    digest = config_hash(request.config, request.limits)
    prepare_out_dir(request.out, remove=())
    cases = select_cases(discover_cases(request.cases, request.out), request.shard)
    worker = CaseGrader(loaded, request.limits, request.out, digest, request.force)
    progress = Progress(len(cases), stream)
    outcomes, interrupted = run_pool(cases, worker, request.jobs, progress.update)
    progress.close()
    summary = BatchSummary(
        config=request.config,
        config_hash=digest,
        cases_dir=request.cases,
        shard=request.shard,
        outcomes=tuple(outcomes[case.name] for case in cases if case.name in outcomes),
        elapsed_s=time.monotonic() - started,
        interrupted=interrupted,
    )
    write_summary(request.out, summary)
    return summary
