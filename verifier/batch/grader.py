"""Grading one case, in a worker, and remembering that it was graded.

Every case goes through grading.grade and output.write_outputs, so its reward is
the one `verifier grade` writes. A case that cannot be graded becomes an error row
(never an exception out of the batch). `batch.json` beside each case's reward
records the config hash, so a rerun skips cases already graded with the same config
and an interrupted batch resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from verifier import __version__
from verifier.batch.cases import Case
from verifier.batch.summary import CaseOutcome, CaseStatus
from verifier.engine import Limits
from verifier.errors import ConfigError, VerifierError
from verifier.grading import LoadedEval, grade
from verifier.output import OUTPUT_FILES, REWARD_JSON, prepare_out_dir, write_outputs
from verifier.references import referenced_files

MARKER = "batch.json"


class CaseGrader(NamedTuple):
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
                return earlier._replace(resumed=True)
        started = time.perf_counter()
        outcome = self._grade(case, out)
        outcome = outcome._replace(seconds=time.perf_counter() - started)
        write_marker(out, self.config_hash, outcome)
        return outcome

    def _grade(self, case: Case, out: Path) -> CaseOutcome:
        try:
            # --out was probed once; a case dir that dies mid-case leaves nothing graded
            prepare_out_dir(out, remove=(MARKER, *OUTPUT_FILES), probe=False)
            step = case.step if self.loaded.config.step_ids else None
            grading = grade(
                self.loaded, case.case_dir, self.limits, case_id=case.case_id, step=step,
                agent_logs=case.agent_logs,
            )  # fmt: skip
            write_outputs(out, grading)
        except VerifierError as error:
            return CaseOutcome(case.name, CaseStatus.FAILED, error=error.message)
        except Exception as error:  # one bad case never stops the batch
            return CaseOutcome(
                case.name, CaseStatus.FAILED, error=f"internal error: {_describe(error)}"
            )
        errored = tuple(result.name for result in grading.results if result.failed)
        return CaseOutcome(
            case.name, CaseStatus.REWARDED, reward=grading.reward, errored_judges=errored
        )


def read_marker(out: Path, digest: str) -> CaseOutcome | None:
    """The earlier outcome when this case was graded with the same config and its
    reward is still there; cases that errored are tried again."""
    try:
        record = json.loads((out / MARKER).read_text(encoding="utf-8"))
        if record.get("config_hash") != digest or record.get("status") != CaseStatus.REWARDED:
            return None
        if not (out / REWARD_JSON).is_file():
            return None
        return CaseOutcome.from_json(record)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def write_marker(out: Path, digest: str, outcome: CaseOutcome) -> None:
    """Written in place, not renamed: a torn marker is invalid JSON, so the case is
    graded again, which is all atomicity would buy here (at two more syscalls a case)."""
    record = {"config_hash": digest, "verifier_version": __version__, **outcome.to_json()}
    record.pop("resumed")
    with contextlib.suppress(OSError), (out / MARKER).open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


# --- the config hash (what "already graded with this config" means) -----------------


def config_hash(config_path: Path, limits: Limits) -> str:
    """sha256 of eval.yaml, the files it references, the verifier version and --no-llm.

    Any of them can change a reward, so any change re-grades. Judge modules'
    local imports are included (references.referenced_files, the same list a task
    package copies).
    """
    digest = hashlib.sha256()
    skipped = sorted(pool.value for pool in limits.skip_pools)
    digest.update(f"harbor-verifier {__version__}\0skip={skipped}\0".encode())
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
