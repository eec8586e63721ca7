"""What a batch reports: a row per case, the progress while it runs, summary.json/.csv.

A row (CaseOutcome) is what a worker or the parent makes of a case, what each case's
batch.json remembers, and what the summary files list; a case that could not be
graded is a row too, with status `error` and no reward, and an entry of --cases that
is not a case (a plain file, a dangling link, a link leaving --cases) is a row with
status `skipped` and the reason. A case's status (was a reward written?) is not a
judge's status (verifier.results.Status): a rewarded case may well have judges that
errored, which its row lists and the summary counts apart (`cases_with_judge_errors`,
and the judge records that errored or timed out), so that a batch whose judges could
not run never reads as a clean one.
"""

from __future__ import annotations

import contextlib
import enum
import io
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import IO, TYPE_CHECKING, Any

import attrs

from verifier import __version__
from verifier.batch.cases import Shard
from verifier.batch.layout import summary_paths
from verifier.output import write_atomic
from verifier.redact import redact

if TYPE_CHECKING:
    from verifier.batch.budget import BudgetFigures
    from verifier.judges.llm.gate import GateFigures
    from verifier.judges.llm.judge import Spend

COUNTS = ("requests", "cache_hits", "input_tokens", "output_tokens")


class CaseStatus(enum.StrEnum):
    REWARDED = "ok"  # the case's reward files were written
    FAILED = "error"  # no reward: the case could not be graded (the row's error says why)
    SKIPPED = "skipped"  # not a case (the row's error says why); never graded


@attrs.frozen
class CaseOutcome:
    """One row of the summary; the counts are the case's LLM requests when it was graded."""

    name: str
    status: CaseStatus
    reward: float | None = None
    errored_judges: tuple[str, ...] = ()  # errored or timed out
    seconds: float = 0.0
    error: str | None = None
    resumed: bool = False
    requests: int = 0  # HTTP requests sent, retries included
    cache_hits: int = 0  # samples answered from the cache
    input_tokens: int = 0  # of the requests sent (not of cache hits)
    output_tokens: int = 0
    timed_out_judges: tuple[str, ...] = ()  # those of errored_judges that timed out
    cost_usd: float | None = 0.0  # of the requests sent; None: a model without a price

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.name,
            "status": self.status.value,
            "reward": self.reward,
            "errored_judges": list(self.errored_judges),
            "timed_out_judges": list(self.timed_out_judges),
            "time_s": round(self.seconds, 4),
            "resumed": self.resumed,
            "error": self.error,
            **{name: getattr(self, name) for name in COUNTS},
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 8),
        }

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> CaseOutcome:
        counts: dict[str, Any] = {name: int(record.get(name, 0)) for name in COUNTS}
        return cls(
            name=record["case"],
            status=CaseStatus(record["status"]),
            reward=record["reward"],
            errored_judges=tuple(record["errored_judges"]),
            timed_out_judges=tuple(record.get("timed_out_judges", ())),
            seconds=float(record["time_s"]),
            error=record.get("error"),
            **counts,
            cost_usd=record.get("cost_usd", 0.0),
        )


@attrs.frozen
class LLMFigures:
    """What this run's LLM requests did and cost (summary.json `llm`)."""

    concurrency: int  # requests in flight allowed per endpoint
    cache: str | None  # the cache dir, None when off
    requests: int = 0
    cache_hits: int = 0
    tokens: Mapping[str, Mapping[str, int]] = MappingProxyType({})  # model -> input/output
    latencies: tuple[float, ...] = ()  # of every answered request
    endpoints: Mapping[str, Mapping[str, int]] = MappingProxyType({})  # url -> gate figures
    costs: Mapping[str, float] = MappingProxyType({})  # model -> USD, the priced ones
    unpriced: tuple[str, ...] = ()  # models without a price (their cost is unknown)

    @property
    def cost_usd(self) -> float | None:
        """What the requests sent cost; None when some went to a model without a price."""
        return None if self.unpriced else math.fsum(self.costs.values())

    @classmethod
    def tally(
        cls,
        concurrency: int,
        cache: Path | None,
        spends: Sequence[Spend],
        endpoints: Mapping[str, GateFigures],
    ) -> LLMFigures:
        """The figures from every LLM judge's Spend and the stage's gates."""
        tokens: dict[str, dict[str, int]] = {}
        costs: dict[str, float] = {}
        unpriced: set[str] = set()
        for spend in spends:
            counts = tokens.setdefault(spend.model, {"input": 0, "output": 0})
            counts["input"] += spend.input_tokens
            counts["output"] += spend.output_tokens
            if spend.cost_usd is None:
                unpriced.add(spend.model)
            else:
                costs[spend.model] = costs.get(spend.model, 0.0) + spend.cost_usd
        return cls(
            concurrency=concurrency,
            cache=str(cache) if cache is not None else None,
            requests=sum(spend.requests for spend in spends),
            cache_hits=sum(spend.cache_hits for spend in spends),
            tokens=tokens,
            latencies=tuple(latency for spend in spends for latency in spend.latencies),
            endpoints={
                redact(url): attrs.asdict(figures, recurse=False)
                for url, figures in endpoints.items()
            },
            costs=costs,
            unpriced=tuple(sorted(unpriced)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "concurrency_per_endpoint": self.concurrency,
            "cache": self.cache,
            "requests": self.requests,
            "cache_hits": self.cache_hits,
            "tokens": {model: dict(counts) for model, counts in self.tokens.items()},
            "latency_s": percentiles(self.latencies),
            "endpoints": {url: dict(figures) for url, figures in self.endpoints.items()},
            "cost_usd": {
                "total": _usd(self.cost_usd),
                "by_model": {model: _usd(cost) for model, cost in self.costs.items()},
                "unpriced_models": list(self.unpriced),
            },
        }


def _usd(cost: float | None) -> float | None:
    return None if cost is None else round(cost, 6)


def percentiles(values: Sequence[float]) -> dict[str, float] | None:
    """p50/p90/p99/max (nearest rank), None without values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = {
        name: math.ceil(share * len(ordered)) - 1
        for name, share in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
    }
    shown = {name: ordered[max(0, index)] for name, index in rank.items()}
    shown["max"] = ordered[-1]
    return {name: round(value, 3) for name, value in shown.items()}


@attrs.frozen
class BatchSummary:
    """The batch as a whole, written to summary.json (with every row) and summary.csv."""

    config: Path
    config_hash: str
    cases_dir: Path
    shard: Shard | None
    outcomes: tuple[CaseOutcome, ...]
    elapsed_s: float
    stopped_by: str | None = None  # SIGTERM / SIGINT when a signal stopped the batch
    llm: LLMFigures | None = None  # None: no LLM judge ran
    # Over a Harbor job dir (after the summary files): a verifier.batch.report.JobReport,
    # and with --write-back a verifier.batch.writeback.WriteBack (both import this module).
    report: Any = None
    written_back: Any = None
    budget: BudgetFigures | None = None  # None: no --max-cost-usd
    calibration: Any = None  # verifier.batch.calibrate.Calibration; None: no --calibrate

    @property
    def interrupted(self) -> bool:
        return self.stopped_by is not None

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
            "skipped": self.count(status=CaseStatus.SKIPPED),
            "errors": self.count(status=CaseStatus.FAILED),
            "cases_with_judge_errors": self.with_judge_errors,
            "judges_errored": self.judge_records(),
            "judges_timed_out": self.judge_records(timeouts=True),
            "mean_reward": self.mean_reward,
            "elapsed_s": round(self.elapsed_s, 3),
            "cases_per_s": round(processed / self.elapsed_s, 1) if self.elapsed_s > 0 else None,
            "interrupted": self.interrupted,
            "stopped_by": self.stopped_by,
            "llm": self.llm.to_json() if self.llm is not None else None,
            "budget": self.budget.to_json() if self.budget is not None else None,
            "calibration": self.calibration.to_json() if self.calibration is not None else None,
            "cases": [row.to_json() for row in self.outcomes],
        }

    def judge_records(self, *, timeouts: bool = False) -> int:
        """Judge records that errored or timed out in all (only those that timed out)."""
        return sum(
            len(row.timed_out_judges if timeouts else row.errored_judges) for row in self.outcomes
        )

    @property
    def with_judge_errors(self) -> int:
        """Cases rewarded although a judge errored or timed out (not counted in errors)."""
        return sum(1 for row in self.outcomes if row.errored_judges)

    def line(self) -> str:
        """The one-line result: stdout, and the Kubernetes termination message."""
        mean = self.mean_reward
        shown = "n/a" if mean is None else f"{mean:.4f}"
        shard = f" shard={self.shard}" if self.shard else ""
        stopped = f" INTERRUPTED by {self.stopped_by}" if self.stopped_by else ""
        llm = (
            f" llm_requests={self.llm.requests} cache_hits={self.llm.cache_hits}"
            f" cost_usd={_shown_usd(self.llm.cost_usd)}"
            if self.llm is not None
            else ""
        )
        if self.budget is not None and self.budget.exhausted:
            stopped += f" {self.budget.line()}"
        return (
            f"cases={len(self.outcomes)} "
            f"graded={self.count(status=CaseStatus.REWARDED, resumed=False)} "
            f"resumed={self.count(resumed=True)} skipped={self.count(status=CaseStatus.SKIPPED)} "
            f"errors={self.count(status=CaseStatus.FAILED)} "
            f"judge_errors={self.judge_records() - self.judge_records(timeouts=True)} "
            f"judge_timeouts={self.judge_records(timeouts=True)} "
            f"with_judge_errors={self.with_judge_errors} "
            f"mean_reward={shown}{llm}{shard}{stopped}"
        )


def _shown_usd(cost: float | None) -> str:
    return "unknown" if cost is None else f"{cost:.4f}"


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
        self.done = self.errors = self.judge_errors = self.resumed = 0
        self.started = self.last = time.monotonic()
        self.step = max(1, total // 20)

    def update(self, outcome: CaseOutcome) -> None:
        self.done += 1
        self.errors += outcome.status is CaseStatus.FAILED
        self.judge_errors += bool(outcome.errored_judges)
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
            f"errors {self.errors}  judge errors {self.judge_errors}  resumed {self.resumed}"
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

CSV_COLUMNS = (
    "case",
    "status",
    "reward",
    "errored_judges",
    "time_s",
    "resumed",
    "error",
    *COUNTS,
    "timed_out_judges",
    "cost_usd",
)


def write_summary(out: Path, summary: BatchSummary) -> None:
    """summary.json and summary.csv under OUT/.batch/ (see verifier.batch.layout)."""
    json_path, csv_path = summary_paths(out, summary.shard)
    write_atomic(csv_path, summary_csv(summary.outcomes))
    write_atomic(json_path, json.dumps(summary.to_json(), indent=2) + "\n")


def summary_csv(outcomes: Sequence[CaseOutcome]) -> str:
    import csv  # at a batch's end: not in the memory of the workers forked at its start

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in outcomes:
        writer.writerow(
            [
                row.name,
                row.status.value,
                "" if row.reward is None else repr(row.reward),
                ";".join(row.errored_judges),
                f"{row.seconds:.4f}",
                int(row.resumed),
                row.error or "",
                *(getattr(row, name) for name in COUNTS),
                ";".join(row.timed_out_judges),
                "" if row.cost_usd is None else round(row.cost_usd, 8),
            ]
        )
    return buffer.getvalue()
