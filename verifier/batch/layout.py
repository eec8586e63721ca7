"""Where a batch keeps its own files in --out, and the lock that keeps one batch per dir.

Cases own `OUT/<case>/`; a name starting with "." is never a case (see cases.py), so
the batch's files live under dot-names no case can take: `OUT/.batch/` holds the
summaries, the lock and the ledgers of shared budgets, `OUT/.llm-cache/` the model
answers. A case named `summary.json` is just a case.

The lock is an flock on `OUT/.batch/lock`: a batch without --shard holds it
exclusively, a shard holds it shared and its own `lock.shard-I-of-N` exclusively, so
the N pods of a sharded batch run side by side on one volume while a second run of
the same batch (or of the same shard) is refused instead of grading cases twice into
the same files. The lock goes when the process (and every process it forked) ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from verifier.batch.cases import Shard
from verifier.errors import OutputError

BATCH_DIR = ".batch"
LLM_CACHE_DIR = ".llm-cache"
SUMMARY = "summary"


def batch_dir(out: Path) -> Path:
    return out / BATCH_DIR


def summary_paths(out: Path, shard: Shard | None) -> tuple[Path, Path]:
    """summary.json/.csv; a shard writes its own pair so N pods never clobber each other."""
    stem = SUMMARY if shard is None else f"{SUMMARY}.{_shard_name(shard)}"
    return batch_dir(out) / f"{stem}.json", batch_dir(out) / f"{stem}.csv"


def report_path(out: Path, shard: Shard | None) -> Path:
    """The job report of a batch over a Harbor job dir (verifier.batch.report)."""
    stem = "report" if shard is None else f"report.{_shard_name(shard)}"
    return batch_dir(out) / f"{stem}.json"


def budget_path(out: Path, budget_id: str) -> Path:
    """The ledger of the budget that the batches naming budget_id share (verifier.batch.budget)."""
    return batch_dir(out) / f"budget.{budget_id}.json"


def account_name(shard: Shard | None) -> str:
    """A batch's account in a shared budget: its shard's, one per lock holder."""
    return "batch" if shard is None else _shard_name(shard)


def default_llm_cache(out: Path) -> Path:
    return out / LLM_CACHE_DIR


@contextlib.contextmanager
def batch_lock(out: Path, shard: Shard | None) -> Iterator[None]:
    """Hold the batch's lock on out (OutputError, exit 4, when another batch holds it)."""
    directory = batch_dir(out)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(f"{directory}: cannot be created ({error.strerror})") from None
    with contextlib.ExitStack() as held:
        mode = fcntl.LOCK_EX if shard is None else fcntl.LOCK_SH
        held.enter_context(_flock(directory / "lock", mode, out, shard))
        if shard is not None:
            own = directory / f"lock.{_shard_name(shard)}"
            held.enter_context(_flock(own, fcntl.LOCK_EX, out, shard))
        yield


@contextlib.contextmanager
def _flock(path: Path, mode: int, out: Path, shard: Shard | None) -> Iterator[None]:
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o664)
    except OSError as error:
        raise OutputError(f"{path}: cannot be opened ({error.strerror})") from None
    try:
        try:
            fcntl.flock(descriptor, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            what = "" if shard is None else f" (shard {shard}, or a run without --shard)"
            raise OutputError(
                f"{out}: another verifier batch is grading into this dir{what}; wait for it "
                "to finish, or pass another --out"
            ) from None
        yield
    finally:
        os.close(descriptor)


def _shard_name(shard: Shard) -> str:
    return f"shard-{shard.index}-of-{shard.count}"
