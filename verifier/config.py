"""eval.yaml -> EvalConfig: every validation rule, each error naming file and key.

Loading is the only place the task author's intent is checked. Anything that would
otherwise surface as a wrong reward on every case (a typo'd key, a judge name that a
formula cannot see, a score_range that cannot normalize) is refused here, before a
single case is graded.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import attrs
import yaml

from verifier.errors import ConfigError, did_you_mean
from verifier.formula import FUNCTIONS, Formula, FormulaError, parse_formula

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_SCORE_RANGE = (1.0, 5.0)
RESERVED_NAMES = frozenset({"reward", *FUNCTIONS})
SUITE_LEVEL_KEYS = frozenset({
    "description", "execution", "runner", "models", "permissions", "mlflow", "dataset",
    "inputs", "traces", "thresholds", "hooks", "generation",
})  # fmt: skip
VERIFIER_KEYS = frozenset({"name", "outputs", "judges", "reward", "annotations"})
LLM_KEYS = frozenset({
    "llm_rubric", "prompt", "prompt_file", "model", "samples", "context", "provider",
})  # fmt: skip
JUDGE_KEYS = frozenset({
    "name", "description", "if", "check", "module", "function", "builtin", "arguments",
    "score_range", "feedback_type", "timeout", "agent", "step", *LLM_KEYS,
})  # fmt: skip
REWARD_KEYS = frozenset({"judge", "normalize", "formula", "weights", "score_range", "raw", "gate"})
_NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")

JudgeKind = Literal["builtin", "check", "llm", "module"]
FeedbackType = Literal["bool", "int", "float"]
ScoreRange = tuple[float, float]


@attrs.frozen(slots=True)
class JudgeConfig:
    name: str
    kind: JudgeKind
    key: str  # where it sits in eval.yaml, e.g. "judges[2] (quality)", for messages
    condition: str | None = None
    check: str | None = None
    module: str | None = None
    function: str | None = None
    builtin: str | None = None
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    score_range: ScoreRange | None = None
    feedback_type: FeedbackType | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    description: str | None = None
    llm: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(slots=True)
class RewardConfig:
    mode: Literal["judge", "weighted", "expression"]
    gate: bool
    judge: str | None = None
    normalize: bool = False
    formula: Formula | None = None
    weights: tuple[tuple[str, float], ...] = ()
    raw: frozenset[str] = frozenset()
    score_range: ScoreRange | None = None


@attrs.frozen(slots=True)
class EvalConfig:
    path: Path
    name: str
    outputs: tuple[str, ...]
    judges: tuple[JudgeConfig, ...]
    reward: RewardConfig | None
    annotations: Mapping[str, Any]
    default_model: str | None
    warnings: tuple[str, ...]

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def judge(self, name: str) -> JudgeConfig | None:
        return next((judge for judge in self.judges if judge.name == name), None)


def load_config(path: Path) -> EvalConfig:
    """Read and validate eval.yaml; raise ConfigError (exit 2) listing every problem found."""
    source = str(path)
    document = _read_yaml(path, source)
    if not isinstance(document, dict):
        raise ConfigError(source, "", "must be a YAML mapping with a 'judges' list")
    warnings: list[str] = []
    problems = Problems()
    for key in document:
        if key not in VERIFIER_KEYS | SUITE_LEVEL_KEYS:
            warnings.append(
                f"{source}: {key}: unknown top-level key, ignored{did_you_mean(key, VERIFIER_KEYS)}"
            )
    name = document.get("name") or path.parent.name
    if not isinstance(name, str):
        problems.add(ConfigError(source, "name", "must be a string"))
    judges, failed_names = _judges(document.get("judges"), source, warnings, problems)
    reward = problems.attempt(
        _reward, document.get("reward"), judges, failed_names, source, warnings
    )
    outputs = problems.attempt(_outputs, document.get("outputs"), source)
    annotations = problems.attempt(_annotations, document.get("annotations"), path, source)
    problems.raise_if_any()
    models = document.get("models")
    default_model = models.get("judge") if isinstance(models, dict) else None
    return EvalConfig(
        path=path.resolve(),
        name=name,
        outputs=outputs,
        judges=judges,
        reward=reward,
        annotations=annotations,
        default_model=default_model if isinstance(default_model, str) else None,
        warnings=tuple(warnings),
    )


class Problems:
    """Collects independent config problems so `verifier check` can list them all."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    def add(self, error: ConfigError) -> None:
        self.errors.append(error)

    def attempt(self, validate: Callable[..., Any], *args: Any) -> Any:
        try:
            return validate(*args)
        except ConfigError as error:
            self.errors.append(error)
            return None

    def raise_if_any(self) -> None:
        if self.errors:
            raise ConfigErrors(self.errors)


class ConfigErrors(ConfigError):
    """Several problems: the message is the first (one line); `problems` has them all."""

    def __init__(self, problems: Sequence[ConfigError]) -> None:
        first = problems[0]
        super().__init__(first.source, first.key, first.problem)
        self.problems = tuple(problems)
        if len(problems) > 1:
            self.message += f" (and {len(problems) - 1} more; run `verifier check`)"


def score_range_of(judge: JudgeConfig | None, reward: RewardConfig | None) -> ScoreRange:
    """The range a judge's numbers are normalized over: its own, the deprecated fallback, [1, 5]."""
    if judge is not None and judge.score_range is not None:
        return judge.score_range
    if reward is not None and reward.score_range is not None:
        return reward.score_range
    return DEFAULT_SCORE_RANGE


def parse_yaml(text: str) -> Any:
    """Safe YAML (no Python objects), with libyaml's C parser when it is installed."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _read_yaml(path: Path, source: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            source, "", "file not found; pass --config or set VERIFIER_CONFIG"
        ) from None
    except IsADirectoryError:
        raise ConfigError(
            source, "", "is a directory; point --config at the eval.yaml file"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(source, "", f"cannot be read: {error}") from None
    try:
        return parse_yaml(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        raise ConfigError(source, where, f"invalid YAML: {error.problem}") from None
    except yaml.YAMLError as error:
        raise ConfigError(source, "", f"invalid YAML: {error}") from None


def _outputs(value: Any, source: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(source, "outputs", "must be a list of {path: ...} entries")
    paths = []
    for index, entry in enumerate(value):
        key = f"outputs[{index}].path"
        raw = entry.get("path") if isinstance(entry, dict) else entry
        if not isinstance(raw, str) or not raw.strip():
            raise ConfigError(source, key, "must be a non-empty path relative to the case dir")
        pure = PurePosixPath(raw)
        if pure.is_absolute() or ".." in pure.parts or str(pure) == ".":
            raise ConfigError(
                source, key, f"{raw!r} must be relative to the case dir, without '..', not '.'"
            )
        paths.append(str(pure))
    return tuple(paths)


def _annotations(value: Any, path: Path, source: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        annotations_path = path.parent / value
        if not annotations_path.is_file():
            raise ConfigError(
                source,
                "annotations",
                f"{value!r} is not a file beside eval.yaml ({annotations_path})",
            )
        value = _read_yaml(annotations_path, str(annotations_path))
        if value is None:
            return {}
    if not isinstance(value, dict):
        raise ConfigError(source, "annotations", "must be a mapping or the path of a YAML mapping")
    return value


def _judges(
    value: Any, source: str, warnings: list[str], problems: Problems
) -> tuple[tuple[JudgeConfig, ...], set[str]]:
    """The valid judges, and the names of entries that failed (so the reward block's
    references to them are not reported a second time)."""
    if not isinstance(value, list) or not value:
        problems.add(ConfigError(source, "judges", "must be a non-empty list of judge entries"))
        return (), set()
    judges: list[JudgeConfig] = []
    failed: set[str] = set()
    for index, entry in enumerate(value):
        if isinstance(entry, dict) and entry.get("name") == "pairwise":
            warnings.append(f"{source}: judges[{index}] (pairwise): suite-level judge, skipped")
            continue
        judge = problems.attempt(_judge, entry, f"judges[{index}]", source)
        if judge is None:
            failed.add(str(entry.get("name")) if isinstance(entry, dict) else "")
        elif any(existing.name == judge.name for existing in judges):
            problems.add(
                ConfigError(source, f"{judge.key}.name", f"duplicate judge name {judge.name!r}")
            )
        else:
            judges.append(judge)
    if not judges and not failed:
        problems.add(ConfigError(source, "judges", "has no judge the verifier can run"))
    return tuple(judges), failed


def _judge(entry: Any, position: str, source: str) -> JudgeConfig:
    if not isinstance(entry, dict):
        raise ConfigError(source, position, "must be a mapping with a 'name'")
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME_PATTERN.match(name):
        raise ConfigError(
            source, f"{position}.name", f"{name!r} must be an identifier like 'has_tests'"
        )
    key = f"{position} ({name})"
    if name in RESERVED_NAMES:
        raise ConfigError(source, f"{key}.name", f"{name!r} is reserved; rename the judge")
    if keyword.iskeyword(name):
        raise ConfigError(
            source, f"{key}.name", f"{name!r} is a Python keyword a formula cannot name; rename it"
        )
    for entry_key in entry:
        if entry_key not in JUDGE_KEYS:
            raise ConfigError(
                source,
                f"{key}.{entry_key}",
                f"unknown judge key{did_you_mean(entry_key, JUDGE_KEYS)}",
            )
    kind = _judge_kind(entry, key, source)
    score_range = _score_range(entry.get("score_range"), source, f"{key}.score_range")
    feedback_type = _feedback_type(entry.get("feedback_type"), score_range, source, key)
    return JudgeConfig(
        name=name,
        kind=kind,
        key=key,
        condition=_optional_str(entry, "if", source, key),
        check=_optional_str(entry, "check", source, key),
        module=_optional_str(entry, "module", source, key),
        function=_optional_str(entry, "function", source, key),
        builtin=_optional_str(entry, "builtin", source, key),
        arguments=_arguments(entry.get("arguments"), source, key),
        score_range=score_range,
        feedback_type=feedback_type,
        timeout_s=_timeout(entry.get("timeout"), source, key),
        description=_optional_str(entry, "description", source, key),
        llm={llm_key: entry[llm_key] for llm_key in LLM_KEYS if llm_key in entry},
    )


def _judge_kind(entry: dict[str, Any], key: str, source: str) -> JudgeKind:
    if "builtin" in entry:
        return "builtin"
    if "check" in entry:
        return "check"
    if "agent" in entry:
        raise ConfigError(
            source, f"{key}.agent", "agent judges are not supported by this image; "
            "use check, module, builtin or an LLM judge"
        )  # fmt: skip
    if any(llm_key in entry for llm_key in ("llm_rubric", "prompt", "prompt_file")):
        return "llm"
    if "module" in entry or "function" in entry:
        missing = "function" if "module" in entry else "module"
        if missing not in entry:
            raise ConfigError(
                source, f"{key}.{missing}", "module judges need both module and function"
            )
        return "module"
    raise ConfigError(
        source, key, "has no judge: set one of builtin, check, llm_rubric, prompt, prompt_file, "
        "or module + function"
    )  # fmt: skip


def _optional_str(entry: dict[str, Any], name: str, source: str, key: str) -> str | None:
    value = entry.get(name)
    if value is not None and not isinstance(value, str):
        raise ConfigError(source, f"{key}.{name}", "must be a string")
    return value


def _arguments(value: Any, source: str, key: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(name, str) and name.isidentifier() for name in value
    ):
        raise ConfigError(source, f"{key}.arguments", "must be a mapping of identifier keys")
    return value


def _timeout(value: Any, source: str, key: str) -> float:
    if value is None:
        return DEFAULT_TIMEOUT_S
    if not _is_number(value) or not math.isfinite(value) or value <= 0:
        raise ConfigError(
            source, f"{key}.timeout", f"{value!r} must be a positive number of seconds"
        )
    return float(value)


def _score_range(value: Any, source: str, key: str) -> ScoreRange | None:
    if value is None:
        return None
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(_is_number(bound) and math.isfinite(bound) for bound in value)
    ):
        raise ConfigError(source, key, f"{value!r} must be [lo, hi], two finite numbers")
    low, high = float(value[0]), float(value[1])
    if not low < high:
        raise ConfigError(source, key, f"{value!r} must be increasing (lo < hi)")
    return (low, high)


def _feedback_type(
    value: Any, score_range: ScoreRange | None, source: str, key: str
) -> FeedbackType | None:
    if value in (None, ""):
        return None
    if value not in ("bool", "int", "float"):
        raise ConfigError(source, f"{key}.feedback_type", f"{value!r} must be bool, int or float")
    if value == "bool" and score_range is not None:
        raise ConfigError(
            source, f"{key}.feedback_type", "bool judges have no score_range; remove one of the two"
        )
    if value == "int" and score_range is not None and not all(b.is_integer() for b in score_range):
        raise ConfigError(source, f"{key}.score_range", "an int judge needs whole-number bounds")
    return value


def _reward(
    value: Any,
    judges: Sequence[JudgeConfig],
    failed_names: set[str],
    source: str,
    warnings: list[str],
) -> RewardConfig | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(source, "reward", "must be a mapping (see the reward block reference)")
    for key in value:
        if key not in REWARD_KEYS:
            raise ConfigError(
                source, f"reward.{key}", f"unknown reward key{did_you_mean(key, REWARD_KEYS)}"
            )
    names = {judge.name for judge in judges} | failed_names
    score_range = _score_range(value.get("score_range"), source, "reward.score_range")
    for flag in ("normalize", "gate"):
        if flag in value and not isinstance(value[flag], bool):
            raise ConfigError(source, f"reward.{flag}", "must be true or false")
    if "judge" in value:
        reward = _judge_mode(value, names, source, score_range)
    else:
        reward = _formula_mode(value, names, source, score_range, warnings)
    _warn_shadowed_score_range(reward, judges, source, warnings)
    return reward


def _judge_mode(
    value: dict[str, Any], names: set[str], source: str, score_range: ScoreRange | None
) -> RewardConfig:
    judge = value["judge"]
    clashes = [key for key in ("formula", "weights", "raw") if key in value]
    if clashes:
        raise ConfigError(
            source, "reward.judge", f"cannot be combined with {', '.join(clashes)}; pick one mode"
        )
    if not isinstance(judge, str) or judge not in names:
        raise ConfigError(
            source,
            "reward.judge",
            f"{judge!r} is not a defined judge{did_you_mean(str(judge), names)}",
        )
    return RewardConfig(
        mode="judge",
        judge=judge,
        normalize=value.get("normalize", False),
        gate=value.get("gate", False),
        score_range=score_range,
    )


def _formula_mode(
    value: dict[str, Any],
    names: set[str],
    source: str,
    score_range: ScoreRange | None,
    warnings: list[str],
) -> RewardConfig:
    formula_text = value.get("formula", "weighted")
    if not isinstance(formula_text, str) or not formula_text.strip():
        raise ConfigError(source, "reward.formula", "must be 'weighted' or a Python expression")
    if value.get("normalize"):
        warnings.append(f"{source}: reward.normalize: applies only with reward.judge; ignored")
    raw = value.get("raw", [])
    if not isinstance(raw, list) or not all(isinstance(name, str) for name in raw):
        raise ConfigError(source, "reward.raw", "must be a list of judge names")
    weights = _weights(value.get("weights"), source)
    referenced: dict[str, set[str]] = {"reward.raw": set(raw)}
    if formula_text.strip() == "weighted":
        if not weights or sum(weight for _, weight in weights) <= 0:
            raise ConfigError(
                source, "reward.weights", "formula 'weighted' needs at least one positive weight; "
                "add weights or drop the reward block for the default composition"
            )  # fmt: skip
        mode, formula = "weighted", None
        referenced["reward.weights"] = {name for name, _ in weights}
    else:
        try:
            formula = parse_formula(formula_text)
        except FormulaError as error:
            raise ConfigError(source, "reward.formula", str(error)) from None
        if weights:
            warnings.append(f"{source}: reward.weights: used only by formula 'weighted'; ignored")
        mode = "expression"
        referenced["reward.formula"] = set(formula.free_names)
    for key, used in referenced.items():
        for unknown in sorted(used - names):
            consequence = (
                "it is unbound, so the reward is 0.0 with a warning"
                if key == "reward.formula"
                else "it never has a value and is dropped"
            )
            warnings.append(
                f"{source}: {key}: {unknown!r} matches no judge; {consequence}"
                f"{did_you_mean(unknown, names)}"
            )
    return RewardConfig(
        mode=mode,
        gate=value.get("gate", True),
        formula=formula,
        weights=weights,
        raw=frozenset(raw),
        score_range=score_range,
    )


def _weights(value: Any, source: str) -> tuple[tuple[str, float], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ConfigError(source, "reward.weights", "must be a mapping of judge name to weight")
    for name, weight in value.items():
        if not _is_number(weight) or not math.isfinite(weight) or weight < 0:
            raise ConfigError(
                source, f"reward.weights.{name}", f"{weight!r} must be a non-negative number"
            )
    return tuple((str(name), float(weight)) for name, weight in value.items())


def _warn_shadowed_score_range(
    reward: RewardConfig, judges: Sequence[JudgeConfig], source: str, warnings: list[str]
) -> None:
    if reward.score_range is None:
        return
    composed = composed_judges(reward)
    for judge in judges:
        if judge.name in composed and judge.score_range not in (None, reward.score_range):
            warnings.append(
                f"{source}: reward.score_range: deprecated; judge {judge.name!r} declares its own "
                f"score_range {list(judge.score_range)}, which wins"
            )


def composed_judges(reward: RewardConfig) -> frozenset[str]:
    """The judges whose numbers the reward block normalizes (raw ones are clamped instead)."""
    if reward.mode == "judge":
        return frozenset({reward.judge}) if reward.normalize and reward.judge else frozenset()
    if reward.mode == "weighted":
        return frozenset(name for name, _ in reward.weights) - reward.raw
    assert reward.formula is not None
    return reward.formula.free_names - reward.raw


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
