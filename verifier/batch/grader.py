"""Grading one case in two stages, and remembering that it was graded.

Every case goes through grading.read, the engine and grading.conclude, and its
files through output.write_outputs, so its reward is the one `verifier grade`
writes. The stages: a worker reads the case, runs its CPU judges (each in its own
forked process, as in grade) and builds its LLM judges' prompts (`CaseGrader.__call__`);
a case without LLM requests is finished there, one with some becomes a PendingCase
that the LLM stage answers and the parent finishes (`CaseGrader.finish`). A case
that cannot be graded becomes an error row (never an exception out of the batch).

`batch.json` beside each case's reward records the resume key (config_hash), the
case's fingerprint (its tree as it was once its judges had run, and its agent logs'
trajectory) and the row, so a rerun skips cases already graded the same way and
unchanged since; a case dir that now holds other work (a new rollout under an old
name) is graded again, never given the reward of what was there before. Cases whose
judges errored are graded again unless --keep-errors.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from verifier import __version__
from verifier.batch.cases import Case
from verifier.batch.summary import COUNTS, CaseOutcome, CaseStatus
from verifier.engine import Limits, run_judges
from verifier.errors import ConfigError, VerifierError
from verifier.grading import CaseContext, LoadedEval, conclude, read, step_plan
from verifier.judges.base import Pool, PreparedJudge, Record, interpret
from verifier.judges.builtins import builtin_reference_files
from verifier.output import OUTPUT_FILES, REWARD_JSON, prepare_out_dir, write_outputs
from verifier.parsers import ALL_REWARD_KEYS, RewardKeys, RewardKeysKind
from verifier.references import referenced_files
from verifier.results import JudgeResult, Status
from verifier.trajectory import AGENT_LOGS_TRAJECTORY

if TYPE_CHECKING:
    from verifier.batch.llm_stage import LLMDone, LLMTask
    from verifier.judges.llm.judge import LLMJudge
    from verifier.sandbox import Sandbox

MARKER = "batch.json"


@attrs.frozen
class PendingCase:
    """A case whose CPU judges have run and whose LLM judges wait for the LLM stage."""

    name: str
    started: float  # time.monotonic() when its grading started
    results: Mapping[int, JudgeResult]  # by judge index, every judge that needs no request
    context: CaseContext
    tasks: tuple[LLMTask, ...]
    fingerprint: str | None = None  # case_fingerprint once its CPU judges had run
    ceiling_usd: float = 0.0  # the most its requests can cost (inf: a model has no price)


@attrs.frozen
class CaseGrader:
    """Everything a worker needs, loaded before the fork: call it with a Case."""

    loaded: LoadedEval
    limits: Limits
    out_root: Path
    config_hash: str
    force: bool = False
    keep_errors: bool = False
    llm: Mapping[int, LLMJudge] = MappingProxyType({})  # by judge index: run in two stages
    reward_keys: RewardKeys = ALL_REWARD_KEYS  # what reward.json holds
    deadline_s: float | None = None  # --deadline: each case's whole grade
    sandbox: Sandbox | None = None  # where its judges run code from the case

    def for_slot(self, slot: int) -> CaseGrader:
        """This grader in the batch worker of `slot`: its commands run as the slot's UIDs."""
        if self.sandbox is None:
            return self
        return attrs.evolve(self, sandbox=self.sandbox.in_slot(slot))

    def __call__(self, case: Case) -> CaseOutcome | PendingCase:
        """The CPU stage, in a worker: the finished row, or the case's LLM tasks."""
        out = self.out_root / case.name
        if not self.force:
            earlier = read_marker(
                out, self.config_hash, case_fingerprint(case), keep_errors=self.keep_errors
            )
            if earlier is not None:
                return attrs.evolve(earlier, resumed=True)
        started = time.monotonic()
        try:
            # --out was probed once; a case dir that dies mid-case leaves nothing graded
            prepare_out_dir(out, remove=(MARKER, *OUTPUT_FILES), probe=False)
            step = case.step if self.loaded.config.step_ids else None
            reading = read(
                self.loaded,
                case.case_dir,
                case_id=case.case_id,
                step=step,
                agent_logs=case.agent_logs,
            )
            judges = self.loaded.judges
            graded = step_indices(self.loaded, step)
            engine = [index for index in graded if index not in self.llm]
            limits = self.limits.until(self.deadline_s, started)
            found = run_judges(
                [judges[index] for index in engine], reading.record, limits, self.sandbox
            )
            results: dict[int, JudgeResult] = dict(zip(engine, found, strict=True))
            tasks = []
            for index, judge in self.llm.items():
                if index not in graded:
                    continue
                task = _llm_task(index, judges[index], judge, reading.record, limits.deadline)
                if isinstance(task, JudgeResult):
                    results[index] = task
                else:
                    tasks.append(task)
            # After its command judges (which may write in it), before its reward: what a
            # rerun must find again to skip it. LLM judges change nothing in the case.
            fingerprint = case_fingerprint(case)
        except Exception as error:  # one bad case never stops the batch
            return self._failed(case.name, out, error, started)
        pending = PendingCase(
            case.name,
            started,
            results,
            reading.context,
            tuple(tasks),
            fingerprint,
            math.fsum(self._ceiling(task) for task in tasks),
        )
        return pending if tasks else self.finish(pending, ())

    def _ceiling(self, task: LLMTask) -> float:
        """What --max-cost-usd reserves for the task (counted here, in the worker)."""
        ceiling = self.llm[task.index].ceiling_usd(task.prompt)
        return math.inf if ceiling is None else ceiling

    def finish(self, pending: PendingCase, done: Sequence[LLMDone]) -> CaseOutcome:
        """Compose the reward and write the case's files (in a worker, or in the parent)."""
        out = self.out_root / pending.name
        results = {**pending.results, **{judged.index: judged.result for judged in done}}
        try:
            ordered = tuple(results[index] for index in sorted(results))
            grading = conclude(self.loaded, ordered, pending.context)
            # the batch syncs once, at its end
            write_outputs(out, grading, durable=False, reward_keys=self.reward_keys)
        except Exception as error:
            return self._failed(pending.name, out, error, pending.started)
        spends = [spend for judged in done for spend in judged.spends]
        counts = {name: sum(getattr(spend, name) for spend in spends) for name in COUNTS}
        costs = [spend.cost_usd for spend in spends]
        outcome = CaseOutcome(
            pending.name,
            CaseStatus.REWARDED,
            reward=grading.reward,
            errored_judges=tuple(result.name for result in grading.results if result.failed),
            timed_out_judges=tuple(
                result.name for result in grading.results if result.status is Status.TIMEOUT
            ),
            seconds=time.monotonic() - pending.started,
            **counts,
            cost_usd=None if None in costs else sum(costs),  # type: ignore[arg-type]
        )
        write_marker(out, self.config_hash, outcome, pending.fingerprint)
        return outcome

    def _failed(self, name: str, out: Path, error: Exception, started: float) -> CaseOutcome:
        message = (
            error.message
            if isinstance(error, VerifierError)
            else f"internal error: {type(error).__name__}: {error}"
        )
        outcome = CaseOutcome(
            name, CaseStatus.FAILED, error=message, seconds=time.monotonic() - started
        )
        write_marker(out, self.config_hash, outcome)
        return outcome


def step_indices(loaded: LoadedEval, step: str | None) -> list[int]:
    """The indices of the judges a case's grading runs (all, or its step's: step_plan)."""
    names = {judge.config.name for judge in step_plan(loaded, step).judges}
    return [index for index, judge in enumerate(loaded.judges) if judge.config.name in names]


def llm_judges(loaded: LoadedEval, limits: Limits) -> dict[int, LLMJudge]:
    """The LLM judges a batch runs in two stages, by index (none under --no-llm)."""
    if Pool.LLM in limits.skip_pools or all(judge.pool is not Pool.LLM for judge in loaded.judges):
        return {}
    from verifier.judges.llm.judge import LLMJudge  # jinja2: only for configs that use it

    return {
        index: judge.call
        for index, judge in enumerate(loaded.judges)
        if isinstance(judge.call, LLMJudge)
    }


class _TimeUp(Exception):
    pass


def _llm_task(
    index: int, prepared: PreparedJudge, judge: LLMJudge, record: Record, deadline: float | None
) -> LLMTask | JudgeResult:
    """An LLM judge's prompt for the LLM stage, or its result when it needs no request:
    skipped by its `if:`, its lowest value for a case fact or by its guard, or a prompt
    that failed, or took the judge's whole timeout, to build (the worker is
    single-threaded, so an alarm bounds it)."""
    from verifier.batch.llm_stage import LLMTask
    from verifier.judges.llm.judge import LLMJudgeError

    config = prepared.config
    started = time.monotonic()

    def result(status: Status, **fields: Any) -> JudgeResult:
        elapsed = time.monotonic() - started
        return JudgeResult(config.name, config.kind, status, duration_s=elapsed, **fields)

    try:
        with _time_limit(config.timeout_s):
            try:
                if not prepared.should_run(record):
                    return result(Status.SKIPPED)
            except _TimeUp:
                raise
            except Exception as error:
                return result(Status.ERROR, error=f"if: {type(error).__name__}: {error}")
            prompt = judge.prompt(record)
            screening = judge.screen(prompt)
            answer = judge.unasked(prompt, screening)
            if answer is not None:  # nothing to send: the judge's lowest value
                value, rationale = interpret(answer, config)
                return result(Status.OK, value=value, rationale=rationale, details=answer.details)
    except _TimeUp:
        seconds = f"{config.timeout_s:g}s"
        return result(Status.TIMEOUT, error=f"timed out after {seconds} (judge timeout)")
    except LLMJudgeError as error:
        return result(Status.ERROR, error=str(error), details=error.details)
    except Exception as error:  # a bug in building one prompt errs that judge, not the case
        return result(
            Status.ERROR,
            error=f"internal error building the prompt: {type(error).__name__}: {error}",
        )
    return LLMTask(index, prompt, time.monotonic() - started, deadline, screening)


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    def expire(_signum: int, _frame: object) -> None:
        raise _TimeUp

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def read_marker(
    out: Path, digest: str, fingerprint: str | None, *, keep_errors: bool = False
) -> CaseOutcome | None:
    """The earlier outcome when this case was graded with the same resume key, is as it
    was then (its fingerprint; a case without one is never skipped), and its reward.json
    still says the reward it recorded (a batch flushes its files once, at its end: a
    crash before may have lost some); cases that errored are tried again, and so are
    cases whose judges errored (an endpoint that was down) unless keep_errors."""
    if fingerprint is None:
        return None
    try:
        record = json.loads((out / MARKER).read_text(encoding="utf-8"))
        if record.get("config_hash") != digest or record.get("status") != CaseStatus.REWARDED:
            return None
        if record.get("case_fingerprint") != fingerprint:  # other work under the same name
            return None
        if record.get("errored_judges") and not keep_errors:
            return None
        written = json.loads((out / REWARD_JSON).read_text(encoding="utf-8"))
        if written.get("reward") != record.get("reward"):  # lost or torn in a crash
            return None
        return CaseOutcome.from_json(record)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def write_marker(
    out: Path, digest: str, outcome: CaseOutcome, fingerprint: str | None = None
) -> None:
    """Written in place, not renamed: a torn marker is invalid JSON, so the case is
    graded again, which is all atomicity would buy here (at two more syscalls a case)."""
    record = {
        "config_hash": digest,
        "verifier_version": __version__,
        "case_fingerprint": fingerprint,
        **outcome.to_json(),
    }
    record.pop("resumed")
    with contextlib.suppress(OSError), (out / MARKER).open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


# --- the case's fingerprint (what "this case, unchanged" means) ------------------------

FINGERPRINT_MAX_ENTRIES = 200_000  # as the case reader's cap: past it, never skipped


def case_fingerprint(case: Case) -> str | None:
    """sha256 of the case dir's tree (every entry's path, type, size and modification
    time, symlinks not followed) and of its agent logs' trajectory.json, or None when it
    cannot be listed whole (then the case is always graded again). Stat calls only: a
    case is not read twice to be skipped."""
    digest = hashlib.sha256()
    trails = [case.agent_logs / AGENT_LOGS_TRAJECTORY] if case.agent_logs is not None else []
    seen = 0
    pending = [(str(case.case_dir), "")]
    try:
        for path in trails:
            digest.update(_stat_line("agent-logs", path))
        while pending:
            directory, prefix = pending.pop()
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
            for entry in entries:
                seen += 1
                if seen > FINGERPRINT_MAX_ENTRIES:
                    return None
                relative = f"{prefix}/{entry.name}"
                digest.update(_stat_line(relative, entry))
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, relative))
    except (OSError, ValueError):
        return None
    return digest.hexdigest()


def _stat_line(name: str, entry: os.DirEntry[str] | Path) -> bytes:
    try:
        info = (
            entry.stat(follow_symlinks=False) if isinstance(entry, os.DirEntry) else os.lstat(entry)
        )
    except FileNotFoundError:
        return f"{name}\0absent\n".encode("utf-8", "surrogateescape")
    shown = (
        f"{name}\0{info.st_mode}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ctime_ns}"
        f"\0{info.st_ino}\n"
    )
    return shown.encode("utf-8", "surrogateescape")


# --- the config hash (what "already graded with this config" means) -----------------


def config_hash(
    config_path: Path,
    limits: Limits,
    judges: Mapping[int, LLMJudge] = MappingProxyType({}),
    reward_keys: RewardKeys = ALL_REWARD_KEYS,
) -> str:
    """The resume key: sha256 of everything that can change a case's result.

    eval.yaml and the files it references (judge modules' local imports included:
    references.referenced_files, the same list a task package copies), the verifier
    version, --no-llm, --memory-mb, --reward-keys (reward.json's shape) and each LLM
    judge's effective model,
    provider, endpoint and request settings (VERIFIER_LLM_MAX_TOKENS, _TEMPERATURE,
    _OUTPUT, _SEED, _MAX_CASE_CHARS; `EVAL_JUDGE_MODEL` through the model). Timeouts
    and retries are left out: they change whether a judge errors, and a case whose
    judges errored is graded again anyway.
    """
    digest = hashlib.sha256()
    skipped = sorted(pool.value for pool in limits.skip_pools)
    llm = [judge.fingerprint() for _, judge in sorted(judges.items())]
    digest.update(
        f"harbor-verifier {__version__}\0skip={skipped}\0memory={limits.memory_mb}\0".encode()
    )
    if reward_keys.kind is RewardKeysKind.NAMED:  # `all` leaves earlier digests as they were
        digest.update(f"reward_keys={list(reward_keys.judges)}\0".encode())
    elif reward_keys.kind is RewardKeysKind.NATIVE:
        digest.update(b"reward_keys=native\0")
    digest.update(json.dumps(llm, sort_keys=True, default=str).encode() + b"\0")
    base = config_path.resolve().parent
    try:
        references = referenced_files(config_path, builtin_reference_files)
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
