"""`verifier batch`: every case under a directory, graded by a pool of forked workers.

RL training grades thousands of trials per step, and a changed eval.yaml means
re-grading a finished job: one process per case spends most of its time starting
Python. Here the config is loaded and its judges prepared once, in the parent,
before the workers are forked, so a worker's per-case cost is reading the case,
forking its judges (engine.run_judges, unchanged) and writing three files. Every
case goes through grading.grade and output.write_outputs, so its reward is the one
`verifier grade` writes.

Robustness rules: a case that cannot be graded becomes an error row (never an
exception out of the batch); a worker that dies is replaced and its case recorded
as an error; `batch.json` beside each case's reward records the config hash, so a
rerun skips cases already graded with the same config and an interrupted batch
resumes where it stopped. `--shard I/N` picks cases by a hash of their name, so N
pods cover every case exactly once whatever order they list the directory in.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import IO, Any

import attrs

from verifier import __version__
from verifier.engine import Limits
from verifier.errors import CaseError, ConfigError, OutputError, UsageError, VerifierError
from verifier.grading import LoadedEval, grade, load_eval, refuse_config_inside_case
from verifier.output import (
    OUTPUT_FILES,
    REWARD_JSON,
    ensure_writable_dir,
    write_atomic,
    write_outputs,
)
from verifier.results import Status

MARKER = "batch.json"
SUMMARY = "summary"
HARBOR_CONVENTION_SOURCE = "/logs/artifacts"
EXIT_INTERRUPTED = 130


# --- data passed between the parent, the workers and the summary -----------------


@attrs.frozen(slots=True)
class Shard:
    """Case `name` belongs to shard `index` of `count` by a stable hash of the name.

    A hash (not the position in a sorted listing) keeps a case in its shard when
    cases are added, so a resumed sharded run redoes nothing.
    """

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        index, _, count = text.partition("/")
        try:
            shard = cls(int(index), int(count))
        except ValueError:
            raise UsageError(f"--shard {text!r}: expected I/N, e.g. 0/4") from None
        if not 0 <= shard.index < shard.count:
            raise UsageError(f"--shard {text!r}: I must be in 0..N-1 and N at least 1")
        return shard

    def owns(self, name: str) -> bool:
        digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@attrs.frozen(slots=True)
class Case:
    """One case: `name` is its directory under --out, `case_dir` what the judges read."""

    name: str
    case_dir: Path


@attrs.frozen(slots=True)
class CaseOutcome:
    """One row of the summary. status is ok (a reward was written) or error (none was)."""

    name: str
    status: str
    reward: float | None = None
    errored_judges: tuple[str, ...] = ()
    seconds: float = 0.0
    error: str | None = None
    resumed: bool = False

    def as_record(self) -> dict[str, Any]:
        return {
            "case": self.name,
            "status": self.status,
            "reward": self.reward,
            "errored_judges": list(self.errored_judges),
            "time_s": round(self.seconds, 4),
            "resumed": self.resumed,
            "error": self.error,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> CaseOutcome:
        return cls(
            name=record["case"],
            status=record["status"],
            reward=record["reward"],
            errored_judges=tuple(record["errored_judges"]),
            seconds=float(record["time_s"]),
            error=record.get("error"),
        )


@attrs.frozen(slots=True)
class BatchRequest:
    """What `verifier batch` was asked to do (the CLI options, parsed)."""

    config: Path
    cases: Path
    out: Path
    jobs: int
    shard: Shard | None = None
    force: bool = False
    limits: Limits = attrs.field(factory=Limits)
    termination_log: Path | None = None
    progress: IO[str] | None = None


@attrs.frozen(slots=True)
class BatchSummary:
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

    def count(self, *, status: str | None = None, resumed: bool | None = None) -> int:
        return sum(
            1
            for row in self.outcomes
            if (status is None or row.status == status)
            and (resumed is None or row.resumed == resumed)
        )

    def as_record(self) -> dict[str, Any]:
        processed = self.count(resumed=False)
        return {
            "config": str(self.config),
            "config_hash": self.config_hash,
            "verifier_version": __version__,
            "cases_dir": str(self.cases_dir),
            "shard": str(self.shard) if self.shard else None,
            "count": len(self.outcomes),
            "graded": self.count(status="ok", resumed=False),
            "resumed": self.count(resumed=True),
            "errors": self.count(status="error"),
            "cases_with_judge_errors": sum(1 for row in self.outcomes if row.errored_judges),
            "mean_reward": self.mean_reward,
            "elapsed_s": round(self.elapsed_s, 3),
            "cases_per_s": round(processed / self.elapsed_s, 1) if self.elapsed_s > 0 else None,
            "interrupted": self.interrupted,
            "cases": [row.as_record() for row in self.outcomes],
        }

    def line(self) -> str:
        """The one-line result: stdout, and the Kubernetes termination message."""
        mean = self.mean_reward
        shown = "n/a" if mean is None else f"{mean:.4f}"
        shard = f" shard={self.shard}" if self.shard else ""
        stopped = " INTERRUPTED" if self.interrupted else ""
        return (
            f"cases={len(self.outcomes)} graded={self.count(status='ok', resumed=False)} "
            f"resumed={self.count(resumed=True)} errors={self.count(status='error')} "
            f"mean_reward={shown}{shard}{stopped}"
        )


# --- the command -----------------------------------------------------------------


def batch_request(
    config: Path,
    cases: Path,
    out: Path,
    jobs: int | None,
    shard: str | None,
    force: bool,
    memory_mb: int,
    no_llm: bool,
    termination_log: Path | None,
) -> BatchRequest:
    """The CLI options as a BatchRequest (a bad --shard is a usage error, exit 2).

    A case's CPU judges run one at a time (LLM judges keep their own pool): the
    workers already fill the CPUs, side by side measured no faster on 2 cores, and
    on a 64-CPU node it would mean thousands of judge processes at once.
    """
    return BatchRequest(
        config=config,
        cases=cases,
        out=out,
        jobs=jobs or available_cpus(),
        shard=Shard.parse(shard) if shard else None,
        force=force,
        limits=Limits(
            parallel=1,
            memory_mb=memory_mb,
            skip_pools=frozenset({"llm"}) if no_llm else frozenset(),
        ),
        termination_log=termination_log,
    )


def run_batch_command(request: BatchRequest) -> int:
    """Grade, print the summary line and where it was written, and report the exit code.

    Case errors do not fail the command (they are rows in the summary): in a
    Kubernetes Job a non-zero exit would re-run the whole shard for one bad case.
    """
    from verifier.grade_command import write_termination_message

    summary = run_batch(request)
    paths = summary_paths(request.out, request.shard)
    print(f"batch: {summary.line()}")
    for path in paths:
        print(f"wrote {path}")
    write_termination_message(request.termination_log, summary.line())
    return EXIT_INTERRUPTED if summary.interrupted else 0


def run_batch(request: BatchRequest) -> BatchSummary:
    """Load once, list the cases, grade them in workers, write the summary files."""
    started = time.monotonic()
    loaded = load_eval(request.config)
    stream = request.progress if request.progress is not None else sys.stderr
    for warning in loaded.config.warnings:
        print(f"warning: {warning}", file=stream)
    digest = config_hash(request.config, request.limits)
    ensure_writable_dir(request.out)
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


def available_cpus() -> int:
    """The default --jobs: CPUs this process may use, capped by a cgroup CPU limit.

    In a pod the affinity mask shows the node's CPUs, not the container's limit;
    one worker per node CPU under a 2-CPU limit would only thrash.
    """
    count = len(os.sched_getaffinity(0)) or 1
    quota = _cgroup_cpu_quota()
    return max(1, min(count, math.ceil(quota))) if quota else count


def _cgroup_cpu_quota() -> float | None:
    try:
        fields = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if fields and fields[0] != "max":
            return int(fields[0]) / int(fields[1])
        return None
    except (OSError, ValueError, IndexError):
        pass
    try:
        quota = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        period = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


# --- the config hash (what "already graded with this config" means) -----------------


def config_hash(config_path: Path, limits: Limits) -> str:
    """sha256 of eval.yaml, the files it references, the verifier version and --no-llm.

    Any of them can change a reward, so any change re-grades. Judge modules'
    local imports are included (task.referenced_files, the same list a task
    package copies).
    """
    from verifier.task import referenced_files

    digest = hashlib.sha256()
    digest.update(f"harbor-verifier {__version__}\0skip={sorted(limits.skip_pools)}\0".encode())
    base = config_path.resolve().parent
    try:
        references = referenced_files(config_path)
    except ConfigError:  # only names a task package reserves; the config itself loaded
        references = []
    digest.update(config_path.read_bytes())
    for relative in references:
        for path in _files_under(base / relative):
            digest.update(f"\0{path.relative_to(base).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _files_under(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
        return
    for directory, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(name for name in dirnames if name != "__pycache__")
        for filename in sorted(filenames):
            if not filename.endswith((".pyc", ".pyo")):
                yield Path(directory, filename)


# --- finding the cases ---------------------------------------------------------------


def discover_cases(cases_dir: Path, out_dir: Path | None = None) -> list[Case]:
    """Every case under cases_dir, sorted by name.

    A plain directory: each non-hidden subdirectory is a case. A Harbor job
    directory (its config.json has a job_name): each trial is a case, read from
    the artifacts Harbor collected for it (see harbor_trial_case). The out dir is
    never a case, even when it sits inside cases_dir.
    """
    if not cases_dir.is_dir():
        raise CaseError(f"{cases_dir}: cases directory not found; pass --cases DIR")
    skip = out_dir.resolve() if out_dir is not None else None
    trials = is_harbor_job(cases_dir)
    cases = []
    for entry in sorted(os.scandir(cases_dir), key=lambda entry: entry.name):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        path = Path(entry.path)
        if skip is not None and path.resolve() == skip:
            continue
        cases.append(Case(entry.name, harbor_trial_case(path) if trials else path))
    return cases


def select_cases(cases: Sequence[Case], shard: Shard | None) -> list[Case]:
    return [case for case in cases if shard is None or shard.owns(case.name)]


def is_harbor_job(directory: Path) -> bool:
    """Harbor writes config.json with a job_name at the top of every job directory."""
    try:
        document = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(document, dict) and "job_name" in document


def harbor_trial_case(trial: Path) -> Path:
    """The case of one Harbor trial: what the verifier container would see as its case.

    artifacts/manifest.json lists what Harbor collected; the one declared artifact
    (e.g. /app, at artifacts/app) is the case. With none but the agent's
    /logs/artifacts, that is the case; with several, the whole artifacts dir.
    """
    artifacts = trial / "artifacts"
    try:
        entries = json.loads((artifacts / "manifest.json").read_text(encoding="utf-8"))
        declared = [
            entry["destination"]
            for entry in entries
            if entry.get("type") == "directory"
            and str(entry.get("source", "")).rstrip("/") != HARBOR_CONVENTION_SOURCE
        ]
        convention = [
            entry["destination"]
            for entry in entries
            if str(entry.get("source", "")).rstrip("/") == HARBOR_CONVENTION_SOURCE
        ]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return artifacts
    chosen = declared if declared else convention
    if len(chosen) != 1:
        return artifacts
    relative = PurePosixPath(str(chosen[0]))
    if relative.is_absolute() or ".." in relative.parts:
        return artifacts
    return trial / relative


# --- grading one case (runs in a worker) -------------------------------------------------


@attrs.frozen(slots=True)
class CaseGrader:
    """Everything a worker needs, loaded before the fork: call it with a Case."""

    loaded: LoadedEval
    limits: Limits
    out_root: Path
    config_hash: str
    force: bool

    def __call__(self, case: Case) -> CaseOutcome:
        out = self.out_root / case.name
        if not self.force:
            earlier = read_marker(out, self.config_hash)
            if earlier is not None:
                return attrs.evolve(earlier, resumed=True)
        started = time.perf_counter()
        outcome = self._grade(case, out)
        outcome = attrs.evolve(outcome, seconds=time.perf_counter() - started)
        write_marker(out, self.config_hash, outcome)
        return outcome

    def _grade(self, case: Case, out: Path) -> CaseOutcome:
        try:
            prepare_case_out(out)
            refuse_config_inside_case(self.loaded.config.path, case.case_dir)
            grading = grade(self.loaded, case.case_dir, self.limits)
            write_outputs(out, grading)
        except VerifierError as error:
            return CaseOutcome(case.name, "error", error=error.message)
        except Exception as error:  # one bad case never stops the batch
            return CaseOutcome(case.name, "error", error=f"internal error: {_describe(error)}")
        errored = tuple(
            result.name
            for result in grading.results
            if result.status in (Status.ERROR, Status.TIMEOUT)
        )
        return CaseOutcome(case.name, "ok", reward=grading.reward, errored_judges=errored)


def prepare_case_out(out: Path) -> None:
    """output.prepare_out_dir without its write probe (--out was probed once): a new
    dir needs nothing removed, an existing one loses its marker and reward first (a
    run that dies mid-case must leave nothing that looks graded)."""
    try:
        out.mkdir()
    except FileExistsError:
        try:
            for name in (MARKER, *OUTPUT_FILES):
                (out / name).unlink(missing_ok=True)
        except OSError as error:
            raise OutputError(
                f"{out}: earlier reward cannot be removed ({error.strerror})"
            ) from None
    except OSError as error:
        raise OutputError(f"{out}: cannot be created ({error.strerror})") from None


def read_marker(out: Path, digest: str) -> CaseOutcome | None:
    """The earlier outcome when this case was graded with the same config and its
    reward is still there; cases that errored are tried again."""
    try:
        record = json.loads((out / MARKER).read_text(encoding="utf-8"))
        if record.get("config_hash") != digest or record.get("status") != "ok":
            return None
        if not (out / REWARD_JSON).is_file():
            return None
        return CaseOutcome.from_record(record)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def write_marker(out: Path, digest: str, outcome: CaseOutcome) -> None:
    """Written in place, not renamed: a torn marker is invalid JSON, so the case is
    graded again, which is all atomicity would buy here (at two more syscalls a case)."""
    record = {"config_hash": digest, "verifier_version": __version__, **outcome.as_record()}
    record.pop("resumed")
    with contextlib.suppress(OSError), (out / MARKER).open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


# --- the worker pool ------------------------------------------------------------------


@attrs.define
class _Worker:
    process: Any  # multiprocessing.context.ForkProcess
    conn: multiprocessing.connection.Connection
    case: Case | None = None


class _Stop(Exception):
    """SIGTERM (a Kubernetes deadline or deletion): stop, keep what is graded."""


def run_pool(
    cases: Sequence[Case],
    work: Callable[[Case], CaseOutcome],
    jobs: int,
    report: Callable[[CaseOutcome], None],
) -> tuple[dict[str, CaseOutcome], bool]:
    """Grade cases in `jobs` forked workers, one case at a time each.

    Returns the outcomes by case name and whether the run was interrupted. Forking
    (not spawning) is what shares the loaded config; each worker then forks its
    case's judges itself.
    """
    pending = deque(cases)
    outcomes: dict[str, CaseOutcome] = {}
    workers: list[_Worker] = []
    previous = signal.signal(signal.SIGTERM, _raise_stop)
    try:
        for _ in range(min(jobs, len(cases))):
            workers.append(_start_worker(work))
        for worker in workers:
            _dispatch(worker, pending)
        while any(worker.case is not None for worker in workers):
            for worker, outcome in _collect(workers, work):
                outcomes[outcome.name] = outcome
                report(outcome)
                _dispatch(worker, pending)
        return outcomes, False
    except (KeyboardInterrupt, _Stop):
        return outcomes, True
    finally:
        signal.signal(signal.SIGTERM, previous)
        _stop_workers(workers)


def _start_worker(work: Callable[[Case], CaseOutcome]) -> _Worker:
    context = multiprocessing.get_context("fork")
    parent_end, child_end = context.Pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    process = context.Process(target=_worker_main, args=(child_end, work), daemon=True)
    process.start()
    child_end.close()
    return _Worker(process=process, conn=parent_end)


def _worker_main(conn: multiprocessing.connection.Connection, work: Callable[..., Any]) -> None:
    """The parent handles Ctrl-C and SIGTERM and then stops the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while (case := conn.recv()) is not None:
        conn.send(work(case))


def _dispatch(worker: _Worker, pending: deque[Case]) -> None:
    worker.case = pending.popleft() if pending else None
    if worker.case is not None:
        worker.conn.send(worker.case)


def _collect(
    workers: list[_Worker], work: Callable[[Case], CaseOutcome]
) -> Iterator[tuple[_Worker, CaseOutcome]]:
    """Wait for results; a worker that died is replaced and its case is an error row."""
    busy = [worker for worker in workers if worker.case is not None]
    waitables: list[Any] = [worker.conn for worker in busy]
    waitables += [worker.process.sentinel for worker in busy]
    ready = set(multiprocessing.connection.wait(waitables))
    for worker in busy:
        assert worker.case is not None
        dead = worker.process.sentinel in ready
        if worker.conn not in ready and not dead:
            continue
        outcome = _receive(worker.conn) if worker.conn in ready else None
        if outcome is None or dead:
            worker.process.join()
            if outcome is None:
                outcome = CaseOutcome(
                    worker.case.name, "error", error=_death(worker.process.exitcode)
                )
            worker.conn.close()
            index = workers.index(worker)
            workers[index] = worker = _start_worker(work)
        yield worker, outcome


def _receive(conn: multiprocessing.connection.Connection) -> CaseOutcome | None:
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"the worker grading this case was killed by {signal.Signals(-exitcode).name}"
    return f"the worker grading this case exited with code {exitcode}"


def _stop_workers(workers: list[_Worker]) -> None:
    for worker in workers:
        with contextlib.suppress(OSError, ValueError):
            if worker.case is None:
                worker.conn.send(None)
            else:
                worker.process.terminate()
    for worker in workers:
        worker.process.join(timeout=5)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop


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
        self.errors += outcome.status == "error"
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
    write_atomic(json_path, json.dumps(summary.as_record(), indent=2) + "\n")


def summary_csv(outcomes: Sequence[CaseOutcome]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in outcomes:
        writer.writerow([
            row.name,
            row.status,
            "" if row.reward is None else repr(row.reward),
            ";".join(row.errored_judges),
            f"{row.seconds:.4f}",
            int(row.resumed),
            row.error or "",
        ])  # fmt: skip
    return buffer.getvalue()
