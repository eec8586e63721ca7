"""Writes the graded case to the output dir: all its files or none, reward.json last.

Harbor (and anything polling the dir) reads reward.json first, so it is renamed
into place only after every other file is complete; a reader sees either no
reward or a whole one. All the files (four, and ctrf.json when a judge read a test
report) are written to temporary names and flushed
to disk first (a node crash on a network volume must not leave an empty
reward.json), then renamed; when anything fails, every file of this run is
removed again, so a failed run leaves no reward behind. Stale reward files are
removed before grading starts so that a failed run can never be mistaken for the
previous run's reward; when one cannot be removed, the exit code says so.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verifier.errors import OutputError, StaleRewardError, VerifierError
from verifier.parsers import ALL_REWARD_KEYS, RewardKeys, RewardKeysKind
from verifier.results import (
    CTRF_DETAILS,
    SCRIPT_CREDITED,
    SCRIPT_REWARDS,
    Grading,
    JudgeResult,
)
from verifier.values import finite_float

REWARD_JSON = "reward.json"
REWARD_TXT = "reward.txt"
JUDGES_JSON = "judges.json"
REWARD_DETAILS_JSON = "reward-details.json"
CTRF_JSON = "ctrf.json"  # only when a judge read a test report
OUTPUT_FILES = (REWARD_JSON, REWARD_TXT, JUDGES_JSON, REWARD_DETAILS_JSON, CTRF_JSON)
REWARD_FILES = (REWARD_JSON, REWARD_TXT)


def prepare_out_dir(
    out_dir: Path, *, remove: Sequence[str] = OUTPUT_FILES, probe: bool = True
) -> None:
    """A dir that exists, is writable (probed with a file, unless the caller already
    did) and holds none of `remove`: no earlier reward may survive this run.
    OutputError (exit 4) otherwise."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        if probe:
            test_file = out_dir / f".write-test-{os.getpid()}"
            os.close(os.open(test_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            test_file.unlink()
    except OSError as error:
        raise OutputError(
            f"{out_dir}: output directory is not writable by UID {os.getuid()} "
            f"({error.strerror}); mount it read-write and writable by UID {os.getuid()} "
            f'(podman: -v DIR:{out_dir}:U; docker: --user "$(id -u):0"; or chown/chmod DIR) '
            "or pass --out"
        ) from None
    for name in remove:
        try:
            _remove(out_dir / name)
        except OSError as error:
            raise StaleRewardError(
                f"{out_dir / name}: an earlier output cannot be removed ({error.strerror}); "
                "no reward was written, do not read it as this run's"
            ) from None


def remove_stale_rewards(out_dir: Path, because: str = "no reward was written") -> None:
    """After a failure: no reward file may be left that a reader would take for this run's.

    StaleRewardError (exit 6) when one is there and cannot be removed; its message
    starts with `because`, the failure that stopped this run.
    """
    stuck = []
    for name in REWARD_FILES:
        try:
            _remove(out_dir / name)
        except OSError as error:
            stuck.append(f"{out_dir / name} ({error.strerror})")
    if stuck:
        raise StaleRewardError(
            f"{because}; and {', '.join(stuck)}, from an earlier run, cannot be removed: "
            "do not read it as this run's reward"
        )


def reward_json(grading: Grading, keys: RewardKeys = ALL_REWARD_KEYS) -> dict[str, float]:
    """Harbor's flat reward.json (`--reward-keys`).

    `all` (the default): the reward, then every judge that produced a value (a judge
    without one is absent). Judge names: the reward, then each of those judges this
    grading graded, always present so that every trial has the same keys for Harbor to
    average: a judge without a value is written as 0.0, which is what Harbor's per-key
    mean counts an absent key as (judges.json says why it has none). No names
    (`reward`): the reward alone, the one key Harbor's pass@k needs. `native`: the
    reward, then the keys the task's own script wrote (native_rewards).
    """
    flat = {"reward": grading.reward}
    if keys.kind is RewardKeysKind.NATIVE:
        flat.update(native_rewards(grading))
    elif keys.kind is RewardKeysKind.ALL:
        for result in grading.results:
            if result.value is not None:
                flat[result.name] = float(result.value)
    else:
        by_name = {result.name: result for result in grading.results}
        for name in keys.judges:
            if name in by_name:
                value = by_name[name].value
                flat[name] = 0.0 if value is None else float(value)
    not_finite = [name for name, value in flat.items() if not math.isfinite(value)]
    if not_finite:  # the judges' values and the reward were checked finite before this
        raise VerifierError(
            f"{REWARD_JSON}: {', '.join(not_finite)} is not a finite number; no reward "
            "is written (a bug of the verifier: please report it)"
        )
    return flat


def native_rewards(grading: Grading) -> dict[str, float]:
    """The keys of the reward file the `tests/script` judge's script wrote, as credited
    (native_keys), besides `reward`; none when no such judge has a result that says
    (it errored, was skipped, or there is none: check_reward_keys wants exactly one)."""
    scripts = [
        result
        for result in grading.results
        if result.kind == "builtin" and SCRIPT_CREDITED in result.details
    ]
    if len(scripts) != 1:
        return {}
    [script] = scripts
    written = script.details.get(SCRIPT_REWARDS)
    numbers = {
        str(key): number
        for key, value in (written.items() if isinstance(written, Mapping) else ())
        if (number := finite_float(value)) is not None
    }
    value = None if script.value is None else float(script.value)
    credited = script.details[SCRIPT_CREDITED] is True
    return native_keys(numbers, value if credited else None, grading.reward)


def native_keys(
    written: Mapping[str, float], value: float | None, reward: float
) -> dict[str, float]:
    """The keys the task's script wrote, never claiming more than the reward gave it.

    `written`: its reward file's numbers; `value`: the judge's value, which is that
    file's own (its `reward` key, its one key, or the mean of its keys), None when the
    judge did not credit the file (the script timed out, the file was not usable);
    `reward`: the composed reward. Each key is its number times reward / value when
    the reward is below the value (a gate failed: 0; another judge pulled it down:
    that share), else its number as written; and never above its number as written
    (a negative one stays as it was). An uncredited file's keys are 0. `reward` is not
    among them: reward.json's `reward` is the composed reward. Nothing written: none.
    """
    if value is None:
        scale = 0.0
    elif reward >= value:
        scale = 1.0
    else:  # value > reward >= 0
        scale = reward / value
    return {
        key: min(number, number * scale) + 0.0  # + 0.0: no -0.0
        for key, number in written.items()
        if key != "reward"
    }


def judges_json(grading: Grading) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": grading.config_name,
        "reward": grading.reward,
        "per_judge": {result.name: result.to_json() for result in grading.results},
        "composition": grading.composition.to_json(),
        "task_input": {
            "source": grading.task_input_source,
            "trusted": grading.task_input_trusted,
        },
        "case_warnings": list(grading.case_warnings),
    }
    if grading.case_id is not None:
        document["dataset"] = {"case_id": grading.case_id, "entry": grading.dataset_entry}
    if grading.step is not None:
        document["step"] = grading.step
    return document


COMPOSITION_ROW = "reward"  # a judge cannot be called that: the name is reserved


def reward_details(grading: Grading) -> dict[str, Any]:
    """reward-details.json in the shape harbor-rewardkit writes and `harbor view` renders.

    One row per judge: {kind, score, criteria: [{name, value, weight, raw, reasoning?,
    error?}], warnings?, judge?}: score is the judge's normalized contribution when the
    reward has one, else its value (0.0 when it has none); weight is the weight it has
    in the composition (composition_weights); an LLM judge with criteria lists each of
    them instead (its value in [0, 1], weight and verdict). Before them, the
    composition row, `reward`: a rewardkit group {kind: group, score: the reward,
    aggregation: how the reward was composed, threshold: null, components: each judge
    with its weight and a short copy of its row}, so `harbor view`, which lists the
    rows in the file's order, shows the reward first and how it came about. See
    docs/harbor.md.
    """
    weights = composition_weights(grading)
    rows: dict[str, Any] = {}
    components = []
    for result in grading.results:
        row = _judge_row(grading, result, weights[result.name])
        rows[result.name] = row
        criterion = {
            "name": result.name,
            "value": row["score"],
            "weight": weights[result.name],
            "raw": result.value,
        }
        short = {"kind": row["kind"], "score": row["score"], "criteria": [criterion]}
        components.append({"name": result.name, "weight": weights[result.name], "detail": short})
    composition = grading.composition
    aggregation = grading.reward_rule or composition.mode
    if composition.gate_failed:
        aggregation += f"; gate failed: {', '.join(composition.gate_failed)}, so 0"
    composition_row = {
        "kind": "group",
        "score": grading.reward,
        "aggregation": aggregation,
        "threshold": None,
        "components": components,
        "mode": composition.mode,
        "gate": composition.to_json()["gate"],
        "on_error": composition.on_error,
        "warnings": list(composition.warnings),
    }
    return {COMPOSITION_ROW: composition_row, **rows}


def composition_weights(grading: Grading) -> dict[str, float]:
    """Each judge's weight in the reward: the declared weights of a weighted reward (1
    for `reward.judge`); 1 for each judge a default or expression reward composes (the
    mean's terms, the formula's names); 0 for a judge it does not (a gate, a judge no
    weight names, a skipped one)."""
    composition = grading.composition
    declared = composition.weights or dict.fromkeys(composition.contributions, 1.0)
    return {result.name: float(declared.get(result.name, 0.0)) for result in grading.results}


def _judge_row(grading: Grading, result: JudgeResult, weight: float) -> dict[str, Any]:
    value = None if result.value is None else float(result.value)
    score = grading.composition.contributions.get(result.name, value)
    score = 0.0 if score is None or not math.isfinite(score) else float(score)
    criterion: dict[str, Any] = {
        "name": result.name,
        "value": score,
        "weight": weight,
        "raw": result.value,
    }
    if result.rationale:
        criterion["reasoning"] = str(result.rationale)
    if result.error:
        criterion["error"] = str(result.error)
    criteria = [criterion]
    if isinstance(result.details.get("criteria"), list):  # an LLM judge's criteria, each
        criteria = [
            {
                "name": row["name"],
                "value": row["value"],
                "weight": row["weight"],
                "raw": row["verdict"],
                **({"reasoning": row["rationale"]} if row["rationale"] else {}),
            }
            for row in result.details["criteria"]
        ]
    row: dict[str, Any] = {"kind": result.kind, "score": score, "criteria": criteria}
    if result.status.value != "ok":
        row["warnings"] = [f"status: {result.status.value}"]
    if isinstance(result.details.get("model"), str):
        row["judge"] = {"model": result.details["model"]}
    return row


def ctrf_report(grading: Grading) -> dict[str, Any] | None:
    """ctrf.json: the tests of the judges that read a test report, in CTRF
    (https://ctrf.io) as `harbor view` renders it; None when no judge read one.

    Each judge's tests (tests.py's ctrf_tests: the listed ones with a test list) are its
    `suite`; a judge whose tests are those of an earlier judge (pass_rate and all_passed
    of the same run) adds its name to that suite and no tests."""
    blocks: list[Mapping[str, Any]] = []
    judges: list[list[str]] = []
    for result in grading.results:
        block = result.details.get(CTRF_DETAILS)
        if not isinstance(block, Mapping):
            continue
        if block in blocks:
            judges[blocks.index(block)].append(result.name)
        else:
            blocks.append(block)
            judges.append([result.name])
    if not blocks:
        return None
    summary = dict.fromkeys(("tests", "passed", "failed", "skipped", "pending", "other"), 0)
    tests: list[dict[str, Any]] = []
    for block, names in zip(blocks, judges, strict=True):
        suite = ", ".join(names)
        tests.extend({**test, "suite": [suite]} for test in block["tests"])
        for status, count in block["summary"].items():
            summary[status] += count
            summary["tests"] += count
    now = int(time.time() * 1000)
    tools = sorted({block["tool"] for block in blocks})
    return {
        "reportFormat": "CTRF",
        "specVersion": "1.0.0",
        "generatedBy": "harbor-verifier",
        "results": {
            "tool": {"name": "+".join(tools)},
            "summary": {**summary, "start": now, "stop": now},
            "tests": tests,
        },
    }


def write_outputs(
    out_dir: Path,
    grading: Grading,
    *,
    durable: bool = True,
    reward_keys: RewardKeys = ALL_REWARD_KEYS,
) -> list[Path]:
    """Write the files, all or none, reward.json last, and return their paths.

    `durable` flushes each file and then the directory to disk (fsync) before and
    after the renames; OutputError (exit 4) when anything cannot be written, after
    removing every file of this run (StaleRewardError, exit 6, when even that fails).
    `reward_keys`: what reward.json holds (reward_json).
    """
    ctrf = ctrf_report(grading)
    documents = (
        *(((CTRF_JSON, _dumps(ctrf)),) if ctrf is not None else ()),
        (JUDGES_JSON, _dumps(judges_json(grading))),
        (REWARD_DETAILS_JSON, _dumps(reward_details(grading))),
        (REWARD_TXT, f"{grading.reward!r}\n"),
        (REWARD_JSON, _dumps(reward_json(grading, reward_keys))),
    )
    staged: list[tuple[Path, Path]] = []
    renamed: list[Path] = []
    reclaim_dir(out_dir)
    try:
        for name, text in documents:
            staged.append((_staged(out_dir / name, text, durable=False), out_dir / name))
        if durable:
            _sync_files([temporary for temporary, _ in staged])
        for temporary, final in staged:
            os.replace(temporary, final)
            renamed.append(final)
        if durable:
            _sync_directory(out_dir)
    except BaseException as error:  # a signal mid-way too: all or nothing
        for temporary, _ in staged:
            temporary.unlink(missing_ok=True)
        for path in renamed:
            path.unlink(missing_ok=True)
        if not isinstance(error, OSError):
            raise
        problem = f"{out_dir}: the reward files cannot be written ({error.strerror})"
        remove_stale_rewards(out_dir, because=problem)
        raise OutputError(f"{problem}; none was left") from None
    return renamed


def write_atomic(path: Path, text: str, *, durable: bool = True) -> Path:
    """One file written to a temporary name beside path, flushed, then renamed into place."""
    reclaim_dir(path.parent)
    try:
        temporary = _staged(path, text, durable)
        try:
            os.replace(temporary, path)
        except OSError:
            temporary.unlink(missing_ok=True)
            raise
        if durable:
            _sync_directory(path.parent)
    except OSError as error:
        raise OutputError(f"{path}: cannot be written ({error.strerror})") from None
    return path


def reclaim_dir(directory: Path) -> None:
    """Give back to this UID the use of a dir it owns (read, write, enter), whatever its
    mode became: code from the case running as the same UID may have chmod'ed it, and
    Landlock does not govern chmod (the sandbox's supervisor refuses it; this is what
    keeps the reward when that could not run)."""
    try:
        info = os.stat(directory)
        if info.st_uid == os.geteuid() and info.st_mode & 0o700 != 0o700:
            os.chmod(directory, info.st_mode & 0o7777 | 0o700)
    except OSError:
        return  # what cannot be written is reported by the write itself


def _staged(path: Path, text: str, durable: bool) -> Path:
    """text in a new temporary file beside path (never through a planted symlink)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o664)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary


def _sync_files(paths: Sequence[Path]) -> None:
    """fsync the files side by side: one journal commit instead of one per file. (With
    _thread: the threading module costs more start-up than these four threads.)"""
    import _thread

    descriptors = [os.open(path, os.O_RDONLY) for path in paths]
    failures: list[OSError] = []

    def flush(descriptor: int, done: _thread.LockType) -> None:
        try:
            os.fsync(descriptor)
        except OSError as error:
            failures.append(error)
        finally:
            done.release()

    pending = []
    try:
        for descriptor in descriptors:
            done = _thread.allocate_lock()
            done.acquire()
            _thread.start_new_thread(flush, (descriptor, done))
            pending.append(done)
    finally:
        for done in pending:
            done.acquire()
        for descriptor in descriptors:
            os.close(descriptor)
    if failures:
        raise failures[0]


def _sync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _remove(path: Path) -> None:
    """Remove a file, or a directory planted under an output file's name."""
    if path.is_dir() and not path.is_symlink():
        import shutil  # only here: with lzma and bz2, start-up no grade should pay for a rare case

        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, allow_nan=False, default=str) + "\n"
