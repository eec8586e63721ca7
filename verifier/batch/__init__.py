"""`verifier batch`: every case under a directory, graded by a pool of forked workers.

RL training grades thousands of trials per step, and a changed eval.yaml means
re-grading a finished job: one process per case spends most of its time starting
Python. Here the config is loaded and its judges prepared once, in the parent,
before the workers are forked, so a worker's per-case cost is reading the case,
forking its judges (engine.run_judges, unchanged) and writing three files.

The modules, in the order a batch runs: command (the options, the run), cases
(which cases, Harbor trials, shards), grader (one case in a worker, its batch.json
marker, the config hash), pool (the forked workers), summary (the rows, progress,
summary.json/.csv).
"""

from verifier.batch.cases import Case, Shard, discover_cases, harbor_trial_case
from verifier.batch.command import (
    BatchRequest,
    available_cpus,
    batch_request,
    run_batch,
    run_batch_command,
)
from verifier.batch.grader import MARKER
from verifier.batch.pool import run_pool
from verifier.batch.summary import BatchSummary, CaseOutcome, Progress, summary_paths

__all__ = [
    "MARKER",
    "BatchRequest",
    "BatchSummary",
    "Case",
    "CaseOutcome",
    "Progress",
    "Shard",
    "available_cpus",
    "batch_request",
    "discover_cases",
    "harbor_trial_case",
    "run_batch",
    "run_batch_command",
    "run_pool",
    "summary_paths",
]
