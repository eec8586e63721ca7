"""What a batch reports: a row per case, the progress while it runs, summary.json/.csv.

A row (CaseOutcome) is what a worker sends the parent, what each case's batch.json
remembers, and what the summary files list; a case that could not be graded is a
row too, with status `error` and no reward. A case's status (was a reward written?)
is not a judge's status (verifier.results.Status): a rewarded case may well have
judges that errored, which its row lists.
"""

from __future__ import annotations

import contextlib
import csv
import enum
import io
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple

from verifier import __version__
from verifier.batch.cases import Shard
from verifier.output import write_atomic

SUMMARY = "summary"


class CaseStatus(enum.StrEnum):
    REWARDED = "ok"  # the case's reward files were written
    FAILED = "error"  # no reward: the case could not be graded (the row's error says why)


class CaseOutcome(NamedTuple):
    """One row of the summary."""

    name: str
    status: CaseStatus
    reward: float | None = None
    errored_judges: tuple[str, ...] = ()
    seconds: float = 0.0
    error: str | None = None
    resumed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.name,
            "status": self.status.value,
            "reward": self.reward,
            "errored_judges": list(self.errored_judges),
            "time_s": round(self.seconds, 4),
            "resumed": self.resumed,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> CaseOutcome:
        return cls(
            name=record["case"],
            status=CaseStatus(record["status"]),
            reward=record["reward"],
            errored_judges=tuple(record["errored_judges"]),
            seconds=float(record["time_s"]),
            error=record.get("error"),
        )


class BatchSummary(NamedTuple):
    """The batch as a whole, written to summary.json (with every row) and summary.csv."""

    config: Path
    config_hash: str
    cases_dir: Path
    shard: Shard | None
    outcomes: tuple[CaseOutcome, ...]
    elapsed_s: float
    interrupted: bool = False

    @property
    def rewarded(self) -> list[float]:
        return [row.reward for row in self.outcomes if row.reward is not None]

    @property
    def mean_reward(self) -> float | None:
        rewards = self.rewarded
        return math.fsum(rewards) / len(rewards) if rewards else None

    def count(self, *, status: CaseStatus | None = None, resumed: bool | None = None) -> int:
        return sum(
            1
            for row in self.outcomes
            if (status is None or row.status == status)
            and (resumed is None or row.resumed == resumed)
        )

    def to_json(self) -> dict[str, Any]:
        processed = self.count(resumed=False)
        return {
            "config": str(self.config),
            "config_hash": self.config_hash,
            "verifier_version": __version__,
            "cases_dir": str(self.cases_dir),
            "shard": str(self.shard) if self.shard else None,
            "count": len(self.outcomes),
            "graded": self.count(status=CaseStatus.REWARDED, resumed=False),
            "resumed": self.count(resumed=True),
            "errors": self.count(status=CaseStatus.FAILED),
            "cases_with_judge_errors": sum(1 for row in self.outcomes if row.errored_judges),
            "mean_reward": self.mean_reward,
            "elapsed_s": round(self.elapsed_s, 3),
            "cases_per_s": round(processed / self.elapsed_s, 1) if self.elapsed_s > 0 else None,
            "interrupted": self.interrupted,
            "cases": [row.to_json() for row in self.outcomes],
        }

    def line(self) -> str:
        """The one-line result: stdout, and the Kubernetes termination message."""
        mean = self.mean_reward
        shown = "n/a" if mean is None else f"{mean:.4f}"
        shard = f" shard={self.shard}" if self.shard else ""
        stopped = " INTERRUPTED" if self.interrupted else ""
        return (
            f"cases={len(self.outcomes)} "
            f"graded={self.count(status=CaseStatus.REWARDED, resumed=False)} "
            f"resumed={self.count(resumed=True)} errors={self.count(status=CaseStatus.FAILED)} "
            f"mean_reward={shown}{shard}{stopped}"
        )


# --- progress ----------------------------------------------------------------------


class Progress:
    """A bar redrawn in place on a terminal; elsewhere (logs, CI) a plain line every
    5% or 10 s, so a pod's log shows the batch moving without flooding it."""

    BAR_WIDTH = 28
    REDRAW_S = 0.1
    LINE_EVERY_S = 10.0

    def __init__(self, total: int, stream: IO[str]) -> None:
        self.total = total
        self.stream = stream
        self.tty = _isatty(stream)
        self.done = self.errors = self.resumed = 0
        self.started = self.last = time.monotonic()
        self.step = max(1, total // 20)

    def update(self, outcome: CaseOutcome) -> None:
        self.done += 1
        self.errors += outcome.status is CaseStatus.FAILED
        self.resumed += outcome.resumed
        now = time.monotonic()
        if self.tty:
            if now - self.last >= self.REDRAW_S or self.done == self.total:
                self.last = now
                self._write(f"\r{self._bar()} {self._figures(now)}\x1b[K")
        elif self.done % self.step == 0 or now - self.last >= self.LINE_EVERY_S:
            self.last = now
            self._write(f"batch: {self._figures(now)}\n")

    def close(self) -> None:
        if self.tty and self.total:
            self._write("\n")

    def _bar(self) -> str:
        filled = self.BAR_WIDTH * self.done // self.total if self.total else self.BAR_WIDTH
        return f"[{'#' * filled}{'.' * (self.BAR_WIDTH - filled)}]"

    def _figures(self, now: float) -> str:
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        left = self.total - self.done
        eta = f"{left / rate:.0f}s" if rate > 0 else "?"
        percent = 100 * self.done // self.total if self.total else 100
        return (
            f"{self.done}/{self.total} ({percent}%)  {rate:.1f} cases/s  eta {eta}  "
            f"errors {self.errors}  resumed {self.resumed}"
        )

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stream.write(text)
            self.stream.flush()


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# --- output files ----------------------------------------------------------------------

CSV_COLUMNS = ("case", "status", "reward", "errored_judges", "time_s", "resumed", "error")


def summary_paths(out: Path, shard: Shard | None) -> tuple[Path, Path]:
    """summary.json/.csv; a shard writes its own pair so N pods never clobber each other."""
    stem = SUMMARY if shard is None else f"{SUMMARY}.shard-{shard.index}-of-{shard.count}"
    return out / f"{stem}.json", out / f"{stem}.csv"


def write_summary(out: Path, summary: BatchSummary) -> None:
    json_path, csv_path = summary_paths(out, summary.shard)
    write_atomic(csv_path, summary_csv(summary.outcomes))
    write_atomic(json_path, json.dumps(summary.to_json(), indent=2) + "\n")


def summary_csv(outcomes: Sequence[CaseOutcome]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in outcomes:
        writer.writerow([
            row.name,
            row.status.value,
            "" if row.reward is None else repr(row.reward),
            ";".join(row.errored_judges),
            f"{row.seconds:.4f}",
            int(row.resumed),
            row.error or "",
        ])  # fmt: skip
    return buffer.getvalue()
