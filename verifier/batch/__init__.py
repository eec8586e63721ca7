"""`verifier batch`: every case under a directory, graded by a pool of forked workers.

RL training grades thousands of trials per step, and a changed eval.yaml means
re-grading a finished job: one process per case spends most of its time starting
Python. Here the config is loaded and its judges prepared once, in the parent,
before the workers are forked, so a worker's per-case cost is reading the case,
forking its judges (engine.run_judges, unchanged) and writing the output files.

The modules, in the order a batch runs: run (the request, the run), cases (which
cases, Harbor trials, shards, skipped entries), layout (where the batch's own files
live in --out, the lock), grader (one case in two stages, its batch.json marker, the
resume key), pool (the forked workers, signals), llm (the shared LLM request stage),
processes (forking, the subreaper, nothing left behind), summary (the rows, progress,
summary.json/.csv).
"""

from verifier.batch.cases import Case, Shard, discover_cases, harbor_trial_case
from verifier.batch.grader import MARKER
from verifier.batch.layout import summary_paths
from verifier.batch.pool import run_pool
from verifier.batch.run import BatchRequest, run_batch
from verifier.batch.summary import BatchSummary, CaseOutcome, CaseStatus, Progress

__all__ = [
    "MARKER",
    "BatchRequest",
    "BatchSummary",
    "Case",
    "CaseOutcome",
    "CaseStatus",
    "Progress",
    "Shard",
    "discover_cases",
    "harbor_trial_case",
    "run_batch",
    "run_pool",
    "summary_paths",
]
