"""`verifier batch --calibrate`: how well each judge agrees with human labels.

Labels come from `--labels FILE` (YAML or JSON: `{case: {judge: value}}`, a case by
its name under --cases or its dataset id) or, without one, from each case's dataset
entry, whose annotations.yaml may hold `labels: {judge: value}`. A pass/fail judge's
label is true/false (yes/no, pass/fail, 1/0), any other judge's a number on its
scale. They are read and checked before any case is graded (a label for no judge,
or of the wrong kind, is a usage error, exit 2).

Once the batch has graded, each labelled judge's values (from each graded case's
reward.json, resumed ones too) are set beside the labels: Spearman's rho for
scores, Cohen's kappa for pass/fail (verifier.judges.llm.calibration), with how many
cases had both and how many labelled cases had no value. An LLM judge's row names
the model and the sha256 of the prompt it measured, so the same report after a
model or prompt change shows the drift. `--min-agreement X` fails the run (exit 7)
when a labelled judge's agreement is below X or undefined.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from verifier.batch.cases import Case
from verifier.batch.summary import CaseOutcome, CaseStatus
from verifier.config import EvalConfig
from verifier.errors import ConfigError, UsageError
from verifier.judges.llm.calibration import Agreement, cohen_kappa, spearman
from verifier.output import REWARD_JSON

LABELS_ANNOTATION = "labels"
_TRUE = frozenset({"true", "yes", "pass", "passed", "1"})
_FALSE = frozenset({"false", "no", "fail", "failed", "0"})

Labels = Mapping[str, Mapping[str, bool | float]]  # case name -> judge -> label


@attrs.frozen
class LabelSource:
    labels: Labels
    source: str  # the file, or the dataset's annotations
    unmatched: int = 0  # labelled cases that are not in this batch


@attrs.frozen
class JudgeCalibration:
    judge: str
    agreement: Agreement
    labelled: int  # cases of this batch with a label for the judge
    missing: int  # of those, cases without a value from the judge (error, skipped, ungraded)
    origin: Mapping[str, str] = MappingProxyType({})  # an LLM judge's model, provider, prompt

    def passes(self, minimum: float | None) -> bool:
        value = self.agreement.value
        return minimum is None or (value is not None and value >= minimum)

    def to_json(self) -> dict[str, Any]:
        agreement = self.agreement
        entry: dict[str, Any] = {
            "judge": self.judge,
            "measure": agreement.measure,
            "agreement": None if agreement.value is None else round(agreement.value, 4),
            "pairs": agreement.pairs,
            "labelled": self.labelled,
            "missing": self.missing,
        }
        if agreement.reason is not None:
            entry["undefined"] = agreement.reason
        if agreement.mean_abs_error is not None:
            entry["mean_abs_error"] = round(agreement.mean_abs_error, 4)
        if agreement.confusion is not None:
            entry["confusion"] = dict(
                zip(("tp", "fp", "fn", "tn"), agreement.confusion, strict=True)
            )
        return {**entry, **self.origin}


@attrs.frozen
class Calibration:
    source: str
    judges: tuple[JudgeCalibration, ...]
    min_agreement: float | None = None
    unmatched: int = 0

    @property
    def failing(self) -> list[str]:
        """The judges below --min-agreement (or undefined); all of them when none has labels."""
        if self.min_agreement is None:
            return []
        if not self.judges:
            return ["(no labelled judge)"]
        return [row.judge for row in self.judges if not row.passes(self.min_agreement)]

    def to_json(self) -> dict[str, Any]:
        return {
            "labels": self.source,
            "labelled_cases_not_in_batch": self.unmatched,
            "min_agreement": self.min_agreement,
            "passed": not self.failing,
            "judges": [row.to_json() for row in self.judges],
        }

    def lines(self) -> list[str]:
        """One line per judge, for stdout."""
        lines = []
        for row in self.judges:
            value = row.agreement.value
            shown = f"{value:.3f}" if value is not None else f"undefined ({row.agreement.reason})"
            model = f", model {row.origin['model']}" if "model" in row.origin else ""
            prompt = (
                f", prompt {row.origin['prompt_sha256'][:12]}"
                if "prompt_sha256" in row.origin
                else ""
            )
            below = "" if row.passes(self.min_agreement) else f" BELOW {self.min_agreement:g}"
            lines.append(
                f"calibration: {row.judge} {row.agreement.measure}={shown}{below} "
                f"(pairs={row.agreement.pairs} missing={row.missing}{model}{prompt})"
            )
        if not self.judges:
            lines.append(f"calibration: no labelled judge in {self.source}")
        return lines


def read_labels(path: Path | None, config: EvalConfig, cases: Sequence[Case]) -> LabelSource:
    """The labels of this batch's cases, by case name, checked against the judges."""
    if path is not None:
        return _file_labels(path, config, cases)
    dataset = config.dataset
    labels: dict[str, dict[str, bool | float]] = {}
    if dataset is not None:
        for case in cases:
            entry = dataset.case(case.case_id)
            given = entry.annotations.get(LABELS_ANNOTATION) if entry is not None else None
            if given is not None:
                where = f"{dataset.root / case.case_id}/annotations.yaml: {LABELS_ANNOTATION}"
                labels[case.name] = _checked(given, config, where)
    return LabelSource(labels, f"dataset annotations ({LABELS_ANNOTATION})")


def _file_labels(path: Path, config: EvalConfig, cases: Sequence[Case]) -> LabelSource:
    from verifier.yaml_io import read_yaml

    try:
        document = read_yaml(path, missing="file not found")
    except ConfigError as error:
        raise UsageError(f"--labels: {error.message}") from None
    if not isinstance(document, dict):
        raise UsageError(
            f"--labels: {path}: must map case names (or dataset ids) to {{judge: label}}"
        )
    by_key = {str(key): value for key, value in document.items()}
    labels, matched = {}, set()
    for case in cases:
        key = case.name if case.name in by_key else case.case_id
        if key in by_key:
            labels[case.name] = _checked(by_key[key], config, f"{path}: {key}")
            matched.add(key)
    return LabelSource(labels, str(path), len(set(by_key) - matched))


def _checked(given: Any, config: EvalConfig, where: str) -> dict[str, bool | float]:
    if not isinstance(given, dict):
        raise UsageError(f"--labels: {where}: must map judge names to labels")
    checked = {}
    for name, label in given.items():
        judge = config.judge(str(name))
        if judge is None:
            raise UsageError(f"--labels: {where}: no judge named {name!r} in {config.path}")
        value = _label(label, judge.feedback_type == "bool")
        if value is None:
            kind = "true or false" if judge.feedback_type == "bool" else "a number"
            raise UsageError(f"--labels: {where}.{name}: {label!r} is not {kind}")
        low, high = config.normalization_range(judge.name)
        if not isinstance(value, bool) and not low <= value <= high:
            raise UsageError(
                f"--labels: {where}.{name}: {label!r} is outside the judge's "
                f"scale [{low:g}, {high:g}]"
            )
        checked[str(name)] = value
    return checked


def _label(raw: Any, pass_fail: bool) -> bool | float | None:
    if pass_fail:
        if isinstance(raw, bool):
            return raw
        word = str(raw).strip().lower()
        return True if word in _TRUE else False if word in _FALSE else None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    value = float(raw)
    return value if math.isfinite(value) else None


def calibrate(
    config: EvalConfig,
    labels: LabelSource,
    out: Path,
    outcomes: Iterable[CaseOutcome],
    origins: Mapping[str, Mapping[str, str]],
    min_agreement: float | None,
) -> Calibration:
    """Each labelled judge's agreement over the graded cases; origins: by judge name, an
    LLM judge's model, provider and prompt_sha256."""
    values = {
        row.name: _values(out / row.name)
        for row in outcomes
        if row.status is CaseStatus.REWARDED and row.name in labels.labels
    }
    rows = []
    for judge in config.judges:
        labelled = [
            (case, given[judge.name])
            for case, given in labels.labels.items()
            if judge.name in given
        ]
        if not labelled:
            continue
        pairs = [
            (label, values[case][judge.name])
            for case, label in labelled
            if judge.name in values.get(case, {})
        ]
        found = [label for label, _ in pairs], [value for _, value in pairs]
        if judge.feedback_type == "bool":
            agreement = cohen_kappa([bool(v) for v in found[0]], [v >= 0.5 for v in found[1]])
        else:
            agreement = spearman([float(v) for v in found[0]], found[1])
        missing = len(labelled) - len(pairs)
        origin = origins.get(judge.name, {})
        rows.append(JudgeCalibration(judge.name, agreement, len(labelled), missing, origin))
    return Calibration(labels.source, tuple(rows), min_agreement, labels.unmatched)


def _values(case_out: Path) -> dict[str, float]:
    """The judges' values in a case's reward.json ({} when it cannot be read)."""
    try:
        flat = json.loads((case_out / REWARD_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(flat, dict):
        return {}
    return {
        name: float(value)
        for name, value in flat.items()
        if name != "reward" and isinstance(value, int | float)
    }
