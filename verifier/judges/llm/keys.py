"""The value types of an LLM judge's structured keys: criteria, panel, guard, prices.

Each parses eval.yaml's value into the records of verifier.judges.llm.spec, or names
the key and the fix, and describes itself as JSON Schema for `verifier schema`, as
every field of verifier.config.fields does. Criteria are accepted in rewardkit's
shape (its `[[criterion]]` tables, as YAML), so a rewardkit judge's criteria move
across as written; what rewardkit reads that the verifier cannot (per-criterion
`files`) is refused, never ignored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

import attrs

from verifier.config.fields import Locator, RelativePath
from verifier.errors import did_you_mean
from verifier.judges.llm.spec import (
    CRITERIA_RULES,
    CRITERION_TYPES,
    GUARD_ACTIONS,
    GUARD_ALIASES,
    PANEL_RULES,
    RULE_ALIASES,
    CriterionSpec,
    GuardSpec,
    MemberSpec,
    PriceSpec,
)
from verifier.values import finite_float

MAX_CRITERIA = 50
WORKSPACE = PurePosixPath("/app")  # rewardkit's default workspace: the case dir here
MAX_PANEL = 9
MAX_LEVELS = 10
# What structured-output providers accept as a property name (rewardkit checks the same).
CRITERION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
_CRITERION_KEYS = (
    "name",
    "description",
    "type",
    "id",
    "points",
    "levels",
    "min",
    "max",
    "weight",
    "negate",
    "required",
    "optional",
    "annotations",
    "files",
)
_TYPE_KEYS = {"points": "likert", "levels": "rubric", "min": "numeric", "max": "numeric"}


def criterion_name(description: str) -> str:
    """rewardkit's default name: the description's first 40 characters, as a slug."""
    return re.sub(r"[^a-z0-9]+", "_", description[:40].lower()).strip("_")


def rule_name(value: Any) -> Any:
    """A rule as the verifier names it (rewardkit's `all_pass` is `all-pass`)."""
    return RULE_ALIASES.get(value, value) if isinstance(value, str) else value


@attrs.frozen
class CriteriaField:
    description: str = (
        "criteria graded in one request, each {description, type: binary|likert|numeric|"
        "rubric, name, points, min, max, levels, weight, negate, required, optional}"
    )

    def parse(self, value: Any, at: Locator) -> tuple[CriterionSpec, ...]:
        if not isinstance(value, list) or not value:
            raise at.error("must be a non-empty list of criteria")
        if len(value) > MAX_CRITERIA:
            raise at.error(f"has {len(value)} criteria; at most {MAX_CRITERIA}")
        parsed: list[CriterionSpec] = []
        for index, entry in enumerate(value):
            criterion = _criterion(entry, at.item(index))
            if any(earlier.name == criterion.name for earlier in parsed):
                raise (
                    at.item(index)
                    .child("name")
                    .error(f"duplicate criterion name {criterion.name!r}; set distinct names")
                )
            parsed.append(criterion)
        return tuple(parsed)

    def schema(self) -> dict[str, Any]:
        number = {"type": "number"}
        item = {
            "type": "object",
            "required": ["description"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "pattern": r"^[A-Za-z0-9_-]{1,64}$"},
                "description": {"type": "string", "pattern": r"\S"},
                "type": {"enum": list(CRITERION_TYPES)},
                "id": {"type": "string"},
                "points": {"type": "integer", "minimum": 2, "maximum": 100},
                "levels": {
                    "type": "array",
                    "minItems": 2,
                    "maxItems": MAX_LEVELS,
                    "items": {"type": "string", "pattern": r"\S"},
                },
                "min": number,
                "max": number,
                "weight": {"type": "number", "minimum": 0},
                "negate": {"type": "boolean"},
                "required": {"type": "boolean"},
                "optional": {"type": "boolean"},
                "annotations": {"type": "object"},
            },
        }
        return {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_CRITERIA,
            "items": item,
            "description": self.description,
        }


def _criterion(entry: Any, at: Locator) -> CriterionSpec:
    if not isinstance(entry, dict):
        raise at.error("must be a mapping with a description")
    for key in entry:
        if key not in _CRITERION_KEYS:
            raise at.child(str(key)).error(
                f"unknown criterion key{did_you_mean(str(key), _CRITERION_KEYS)}"
            )
    if "files" in entry:
        raise at.child("files").error(
            "per-criterion files are not read: the judge's own files select the case "
            "files every criterion is graded on; move them there"
        )
    description = entry.get("description")
    if not isinstance(description, str) or not description.strip():
        raise at.child("description").error("must be a non-empty string")
    kind = entry.get("type", "binary")
    if kind not in CRITERION_TYPES:
        raise at.child("type").error(f"{kind!r} must be one of {', '.join(CRITERION_TYPES)}")
    for key, owner in _TYPE_KEYS.items():
        if key in entry and kind != owner:
            raise at.child(key).error(f"is for {owner} criteria; this one is {kind}")
    name = entry.get("name")
    if name is None:
        name = criterion_name(description)
        if not name:
            raise at.child("name").error("the description makes no name; set name")
    if not isinstance(name, str) or not CRITERION_NAME.match(name):
        raise at.child("name").error(
            f"{name!r} must be 1-64 letters, digits, underscores or hyphens"
        )
    annotations = entry.get("annotations", {})
    if not isinstance(annotations, dict):
        raise at.child("annotations").error("must be a mapping")
    flags = {}
    for key in ("negate", "required", "optional"):
        flag = entry.get(key, _annotated(annotations, key))
        if not isinstance(flag, bool):
            raise at.child(key).error("must be true or false")
        flags[key] = flag
    if flags["required"] and flags["optional"]:
        raise at.child("optional").error("a criterion is required or optional, not both")
    identifier = entry.get("id")
    if identifier is not None and not isinstance(identifier, str):
        raise at.child("id").error("must be a string")
    return CriterionSpec(
        name=name,
        description=description.strip(),
        type=kind,
        weight=_number(entry, "weight", 1.0, at, minimum=0.0),
        id=identifier,
        negate=flags["negate"],
        required=flags["required"],
        optional=flags["optional"],
        **_scale_keys(entry, kind, at),
    )


def _annotated(annotations: Mapping[str, Any], flag: str) -> bool:
    """A flag the criterion does not set, as rewardkit reads it from the annotations of
    rubrics imported from datasets: `type` "negative" negates it, `importance`
    "optional" makes it optional."""
    if flag == "negate":
        return "negative" in str(annotations.get("type", "")).lower()
    if flag == "optional":
        return "optional" in str(annotations.get("importance", "")).lower()
    return False


def _scale_keys(entry: Mapping[str, Any], kind: str, at: Locator) -> dict[str, Any]:
    if kind == "likert":
        points = _number(entry, "points", 5, at, minimum=2, maximum=100)
        if not float(points).is_integer():
            raise at.child("points").error(f"{points!r} must be a whole number from 2 to 100")
        return {"points": int(points)}
    if kind == "numeric":
        low, high = _number(entry, "min", 0.0, at), _number(entry, "max", 1.0, at)
        if not low < high:
            raise at.child("max").error(f"{high:g} must be greater than min ({low:g})")
        if not math.isfinite(high - low):
            raise at.child("max").error("max - min spans more than a float holds; narrow it")
        return {"low": low, "high": high}
    if kind == "rubric":
        levels = entry.get("levels")
        if (
            not isinstance(levels, list)
            or not 2 <= len(levels) <= MAX_LEVELS
            or not all(isinstance(level, str) and level.strip() for level in levels)
        ):
            raise at.child("levels").error(
                f"must list 2 to {MAX_LEVELS} level descriptions, lowest first"
            )
        return {"levels": tuple(level.strip() for level in levels)}
    return {}


def _number(
    entry: Mapping[str, Any],
    key: str,
    default: float,
    at: Locator,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
) -> float:
    if key not in entry:
        return default
    number = finite_float(entry[key])
    if (
        number is None
        or (minimum is not None and number < minimum)
        or (maximum is not None and number > maximum)
    ):
        bounds = "" if minimum is None else f" >= {minimum:g}"
        bounds += "" if maximum is None else f" and <= {maximum:g}"
        raise at.child(key).error(f"{entry[key]!r} must be a finite number{bounds}")
    return number


@attrs.frozen
class CaseFilesField:
    """`files:` the case files an LLM judge grades, as rewardkit's judge lists its
    workspace's: relative to the case dir, or absolute under /app (rewardkit's workspace,
    Harbor's work dir: the case here); a dir stands for the files directly in it."""

    description: str = (
        "the case files the judge grades (relative to the case, or under /app); a dir: "
        "the files directly in it; default: every file of the record"
    )

    def parse(self, value: Any, at: Locator) -> tuple[PurePosixPath, ...]:
        if not isinstance(value, list) or not value:
            raise at.error("must be a non-empty list of case paths")
        return tuple(_case_path(item, at.item(index)) for index, item in enumerate(value))

    def schema(self) -> dict[str, Any]:
        item = {"type": "string", "pattern": r"^(?!.*(?:^|/)\.\.(?:/|$))[^\u0000]*\S"}
        return {"type": "array", "minItems": 1, "items": item, "description": self.description}


def _case_path(value: Any, at: Locator) -> PurePosixPath:
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise at.error("must be a path in the case")
    path = PurePosixPath(value.strip())
    if path.is_absolute():
        if path != WORKSPACE and WORKSPACE not in path.parents:
            raise at.error(
                f"{value!r} is outside {WORKSPACE}, rewardkit's workspace (the case here): "
                "give it relative to the case"
            )
        path = path.relative_to(WORKSPACE)
    if ".." in path.parts:
        raise at.error(f"{value!r} leads outside the case")
    return path


@attrs.frozen
class RuleField:
    """`aggregate:` a criteria rule (rewardkit's names too) or a panel rule."""

    description: str = (
        "criteria: weighted-mean (default), all-pass, any-pass, threshold, required-pass; "
        "a panel without criteria: median (default for scores), majority (default for "
        "pass/fail), mean, min"
    )

    def parse(self, value: Any, at: Locator) -> str:
        rule = rule_name(value)
        if rule not in CRITERIA_RULES and rule not in PANEL_RULES:
            if rule == "weighted-sum" or value == "weighted_sum":
                raise at.error(
                    "weighted-sum is not supported: a judge's value stays on its declared "
                    "scale; use weighted-mean"
                )
            known = (*CRITERIA_RULES, *PANEL_RULES)
            raise at.error(f"{value!r} must be one of {', '.join(known)}")
        return rule

    def schema(self) -> dict[str, Any]:
        names = [*CRITERIA_RULES, *RULE_ALIASES, *PANEL_RULES]
        return {"enum": names, "description": self.description}


@attrs.frozen
class PanelField:
    """`panel: [model, ...]` or `panel: {models: [...], aggregate: RULE}`; a member is a
    model name or `{model, provider}`. Returns (members, the panel's rule or None)."""

    description: str = "models that each grade the case; their values are combined"

    def parse(self, value: Any, at: Locator) -> tuple[tuple[MemberSpec, ...], str | None]:
        rule = None
        members_at = at
        if isinstance(value, dict):
            for key in value:
                if key not in ("models", "aggregate"):
                    raise at.child(str(key)).error(
                        f"unknown panel key{did_you_mean(str(key), ('models', 'aggregate'))}"
                    )
            if "aggregate" in value:
                rule = RuleField().parse(value["aggregate"], at.child("aggregate"))
                if rule not in PANEL_RULES:
                    raise at.child("aggregate").error(
                        f"{rule!r} must be a panel rule: {', '.join(PANEL_RULES)}"
                    )
            members_at = at.child("models")
            value = value.get("models")
        if not isinstance(value, list) or not 2 <= len(value) <= MAX_PANEL:
            raise members_at.error(f"must list 2 to {MAX_PANEL} models")
        members = tuple(_member(item, members_at.item(i)) for i, item in enumerate(value))
        return members, rule

    def schema(self) -> dict[str, Any]:
        member = {
            "anyOf": [
                {"type": "string", "pattern": r"\S"},
                {
                    "type": "object",
                    "required": ["model"],
                    "additionalProperties": False,
                    "properties": {
                        "model": {"type": "string", "pattern": r"\S"},
                        "provider": {"type": "string"},
                    },
                },
            ]
        }
        models = {"type": "array", "minItems": 2, "maxItems": MAX_PANEL, "items": member}
        mapping = {
            "type": "object",
            "required": ["models"],
            "additionalProperties": False,
            "properties": {"models": models, "aggregate": {"enum": list(PANEL_RULES)}},
        }
        return {"anyOf": [models, mapping], "description": self.description}


def _member(value: Any, at: Locator) -> MemberSpec:
    if isinstance(value, str) and value.strip():
        return MemberSpec(value.strip())
    if isinstance(value, dict) and set(value) <= {"model", "provider"}:
        model = value.get("model")
        if isinstance(model, str) and model.strip():
            provider = value.get("provider")
            if provider is not None:
                from verifier.judges.llm.providers import PROVIDERS_BY_ALIAS

                if provider not in PROVIDERS_BY_ALIAS:
                    known = ", ".join(sorted(PROVIDERS_BY_ALIAS))
                    raise at.child("provider").error(f"{provider!r} must be one of {known}")
            return MemberSpec(model.strip(), provider)
    raise at.error("must be a model name or {model: NAME, provider: NAME}")


@attrs.frozen
class GuardField:
    description: str = (
        "screen the case material for text aimed at the grader: flag | zero, or "
        "{on_detect: flag|zero, ask_model: true|false}; off (or false) for none"
    )

    def parse(self, value: Any, at: Locator) -> GuardSpec | None:
        if value is False or value == "off":
            return None
        if value is True:
            return GuardSpec()
        if isinstance(value, str):
            return GuardSpec(on_detect=_action(value, at))
        if isinstance(value, dict):
            for key in value:
                if key not in ("on_detect", "ask_model"):
                    raise at.child(str(key)).error(
                        f"unknown guard key{did_you_mean(str(key), ('on_detect', 'ask_model'))}"
                    )
            ask = value.get("ask_model", False)
            if not isinstance(ask, bool):
                raise at.child("ask_model").error("must be true or false")
            action = _action(value.get("on_detect", "flag"), at.child("on_detect"))
            return GuardSpec(on_detect=action, ask_model=ask)
        raise at.error("must be flag, zero, off, or {on_detect: flag|zero, ask_model: BOOL}")

    def schema(self) -> dict[str, Any]:
        actions = [*GUARD_ACTIONS, *GUARD_ALIASES]
        mapping = {
            "type": "object",
            "additionalProperties": False,
            "properties": {"on_detect": {"enum": actions}, "ask_model": {"type": "boolean"}},
        }
        return {
            "anyOf": [{"enum": [*actions, "off"]}, {"type": "boolean"}, mapping],
            "description": self.description,
        }


def _action(value: Any, at: Locator) -> str:
    action = GUARD_ALIASES.get(value, value) if isinstance(value, str) else value
    if action not in GUARD_ACTIONS:
        raise at.error(f"{value!r} must be flag or zero (rewardkit's penalize is zero)")
    return action


@attrs.frozen
class PricesField:
    """`prices:` {model: {input, output}} in USD per million tokens, or a YAML/JSON file
    of that mapping beside eval.yaml. Returns (prices, where they came from)."""

    description: str = (
        "USD per million tokens by model as sent, {MODEL: {input: X, output: Y}}, or a "
        "YAML/JSON file of that mapping beside eval.yaml; over the verifier's defaults"
    )

    def parse(self, value: Any, at: Locator) -> tuple[dict[str, PriceSpec], str]:
        if isinstance(value, str):
            from verifier.errors import ConfigError
            from verifier.yaml_io import read_yaml

            relative = RelativePath().parse(value, at)
            path = at.base_dir / relative
            try:
                document = read_yaml(path, missing="file not found")
            except ConfigError as error:
                raise at.error(error.message) from None
            return parse_prices(document, Locator(str(path), "", at.base_dir)), str(relative)
        return parse_prices(value, at), "eval.yaml"

    def schema(self) -> dict[str, Any]:
        price = {
            "type": "object",
            "required": ["input", "output"],
            "additionalProperties": False,
            "properties": {
                "input": {"type": "number", "minimum": 0},
                "output": {"type": "number", "minimum": 0},
            },
        }
        mapping = {"type": "object", "additionalProperties": price}
        return {"anyOf": [{"type": "string"}, mapping], "description": self.description}


def parse_prices(value: Any, at: Locator) -> dict[str, PriceSpec]:
    """{model: {input: X, output: Y}} -> PriceSpecs; what else is there is an error."""
    if not isinstance(value, dict):
        raise at.error("must map model names to {input: USD, output: USD} per million tokens")
    prices = {}
    for model, price in value.items():
        where = at.child(str(model))
        if not isinstance(model, str) or not model.strip():
            raise where.error("a model name must be a non-empty string")
        if not isinstance(price, dict) or set(price) != {"input", "output"}:
            raise where.error("must be {input: USD, output: USD} per million tokens")
        numbers = {key: finite_float(price[key]) for key in ("input", "output")}
        for key, number in numbers.items():
            if number is None or number < 0:
                raise where.child(key).error(f"{price[key]!r} must be a number >= 0")
        prices[model.strip()] = PriceSpec(numbers["input"], numbers["output"])  # type: ignore[arg-type]
    return prices
