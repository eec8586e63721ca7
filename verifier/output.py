"""Writes the graded case to the output dir: atomically, reward.json last.

Harbor (and anything polling the dir) reads reward.json first, so it is renamed
into place only after every other file is complete; a reader sees either no
reward or a whole one. Stale reward files are removed before grading starts so
that a failed run can never be mistaken for the previous run's reward.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verifier.errors import OutputError
from verifier.results import Grading

REWARD_JSON = "reward.json"
REWARD_TXT = "reward.txt"
JUDGES_JSON = "judges.json"
REWARD_DETAILS_JSON = "reward-details.json"
OUTPUT_FILES = (REWARD_JSON, REWARD_TXT, JUDGES_JSON, REWARD_DETAILS_JSON)


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
    try:
        for name in remove:
            (out_dir / name).unlink(missing_ok=True)
    except OSError as error:
        raise OutputError(
            f"{out_dir}: an earlier reward cannot be removed ({error.strerror})"
        ) from None


def remove_stale_rewards(out_dir: Path) -> None:
    """Best effort, for failures before the out dir was checked: no old reward may survive."""
    for name in (REWARD_JSON, REWARD_TXT):
        with contextlib.suppress(OSError):
            (out_dir / name).unlink(missing_ok=True)


def reward_json(grading: Grading) -> dict[str, float]:
    """Harbor's flat reward.json: the reward, then every judge that produced a value."""
    flat = {"reward": grading.reward}
    for result in grading.results:
        if result.value is not None:
            flat[result.name] = float(result.value)
    assert all(math.isfinite(value) for value in flat.values())
    return flat


def judges_json(grading: Grading) -> dict[str, Any]:
    return {
        "name": grading.config_name,
        "reward": grading.reward,
        "per_judge": {result.name: result.to_json() for result in grading.results},
        "composition": grading.composition.to_json(),
        "case_warnings": list(grading.case_warnings),
    }


def reward_details(grading: Grading) -> dict[str, Any]:
    """reward-details.json in the shape harbor-rewardkit writes and `harbor view` renders.

    One row per judge: {kind, score, criteria: [{name, value, weight, raw, reasoning?,
    error?}], warnings?, judge?}. score is the judge's normalized contribution when
    the reward has one, else its value (0.0 when it has none). See docs/harbor.md.
    """
    contributions = grading.composition.contributions
    details: dict[str, Any] = {}
    for result in grading.results:
        value = None if result.value is None else float(result.value)
        score = contributions.get(result.name, value)
        score = 0.0 if score is None or not math.isfinite(score) else float(score)
        criterion: dict[str, Any] = {
            "name": result.name,
            "value": score,
            "weight": 1.0,
            "raw": result.value,
        }
        if result.rationale:
            criterion["reasoning"] = str(result.rationale)
        if result.error:
            criterion["error"] = str(result.error)
        row: dict[str, Any] = {"kind": result.kind, "score": score, "criteria": [criterion]}
        if result.status.value != "ok":
            row["warnings"] = [f"status: {result.status.value}"]
        if isinstance(result.details.get("model"), str):
            row["judge"] = {"model": result.details["model"]}
        details[result.name] = row
    return details


def write_outputs(out_dir: Path, grading: Grading) -> list[Path]:
    """Write the four files (reward.json last) and return their paths."""
    return [
        write_atomic(out_dir / JUDGES_JSON, _dumps(judges_json(grading))),
        write_atomic(out_dir / REWARD_DETAILS_JSON, _dumps(reward_details(grading))),
        write_atomic(out_dir / REWARD_TXT, f"{grading.reward!r}\n"),
        write_atomic(out_dir / REWARD_JSON, _dumps(reward_json(grading))),
    ]


def _dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, allow_nan=False, default=str) + "\n"


def write_atomic(path: Path, text: str) -> Path:
    """Write text to a temporary file beside path, then rename it into place."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        try:
            temporary.unlink(missing_ok=True)  # never write through a planted symlink
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o664)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    except OSError as error:
        raise OutputError(f"{path}: cannot be written ({error.strerror})") from None
    return path
