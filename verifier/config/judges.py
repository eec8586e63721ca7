"""The `judges:` list -> JudgeConfigs: common keys here, each kind's keys by its kind.

The kind follows from the keys set (there is no `type:`), asking the kinds in
registry order; a key that no kind and no common key knows is an error with the
nearest valid key, because a typo must not pass silently.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from verifier.config.fields import (
    MAX_TIMEOUT_S,
    Arguments,
    Choice,
    Key,
    Locator,
    Number,
    Problems,
    ScoreRangeField,
    Text,
    nullable,
    object_schema,
    parse_keys,
)
from verifier.config.records import DEFAULT_TIMEOUT_S, JudgeConfig, JudgeKind, JudgeKinds
from verifier.errors import ConfigError, ConfigErrors, did_you_mean
from verifier.formula import FUNCTIONS

RESERVED_NAMES = frozenset({"reward", *FUNCTIONS})
SUITE_LEVEL_JUDGE = "pairwise"
NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*$"
_NAME = re.compile(NAME_PATTERN.removesuffix("$") + r"\Z")


@attrs.frozen
class JudgeName:
    """An identifier that a formula can name: not reserved, not a Python keyword."""

    description: str = "identifier: the key in reward.json and formulas"

    def parse(self, value: Any, at: Locator) -> str:
        if not isinstance(value, str) or not _NAME.match(value):
            raise at.error(f"{value!r} must be an identifier like 'has_tests'")
        return value

    def refuse_reserved(self, name: str, at: Locator) -> None:
        if name in RESERVED_NAMES:
            raise at.error(f"{name!r} is reserved; rename the judge")
        if keyword.iskeyword(name):
            raise at.error(f"{name!r} is a Python keyword a formula cannot name; rename it")

    def schema(self) -> dict[str, Any]:
        reserved = sorted(RESERVED_NAMES | set(keyword.kwlist))
        return {
            "type": "string",
            "pattern": NAME_PATTERN,
            "not": {"enum": reserved},
            "description": self.description,
        }


TIMEOUT = Number(
    positive=True,
    maximum=MAX_TIMEOUT_S,
    problem=f"must be a positive number of seconds, at most {MAX_TIMEOUT_S:g}",
    description="seconds",
)
COMMON_KEYS: tuple[Key, ...] = (
    Key("name", JudgeName(), True),
    Key("description", Text()),
    Key("if", Text(description="Python expression; false skips the judge")),
    Key("arguments", Arguments()),
    Key("score_range", ScoreRangeField()),
    Key(
        "feedback_type",
        Choice(("bool", "int", "float"), empty_ok=True, description="what the judge returns"),
    ),
    Key("timeout", TIMEOUT),
    Key("step", Text(description="multi-step scoping")),
)


def parse_judges(
    value: Any, at: Locator, kinds: JudgeKinds, warnings: list[str], problems: Problems
) -> tuple[tuple[JudgeConfig, ...], set[str]]:
    """The valid judges, and the names of entries that failed (so that the reward block's
    references to them are not reported a second time)."""
    if not isinstance(value, list) or not value:
        problems.add(at.error("must be a non-empty list of judge entries"))
        return (), set()
    judges: list[JudgeConfig] = []
    failed: set[str] = set()
    for index, entry in enumerate(value):
        position = at.item(index)
        if isinstance(entry, dict) and entry.get("name") == SUITE_LEVEL_JUDGE:
            warnings.append(f"{at.source}: {position.key} (pairwise): suite-level judge, skipped")
            continue
        judge = problems.attempt(parse_judge, entry, position, kinds, warnings)
        if judge is None:
            failed.add(str(entry.get("name")) if isinstance(entry, dict) else "")
        elif any(existing.name == judge.name for existing in judges):
            problems.add(
                ConfigError(at.source, f"{judge.key}.name", f"duplicate judge name {judge.name!r}")
            )
        else:
            judges.append(judge)
    if not judges and not failed:
        problems.add(at.error("has no judge the verifier can run"))
    return tuple(judges), failed


def parse_judge(
    entry: Any, position: Locator, kinds: JudgeKinds, warnings: list[str]
) -> JudgeConfig:
    """One entry as a JudgeConfig; ConfigErrors naming every problem of the entry that
    does not follow from another (each unknown key, each bad value), not just the
    first."""
    if not isinstance(entry, dict):
        raise position.error("must be a mapping with a 'name'")
    name = JudgeName().parse(entry.get("name"), position.child("name"))
    at = Locator(position.source, f"{position.key} ({name})", position.base_dir)
    problems = Problems()
    problems.attempt(JudgeName().refuse_reserved, name, at.child("name"))
    kind = kinds.claiming(entry)
    before = len(problems.errors)
    for ignored in _check_keys(entry, kind, kinds, at, problems):
        warnings.append(
            f"{at.source}: {at.key}.{ignored}: ignored: this is a {kind.name} judge "  # type: ignore[union-attr]
            "(builtin > check > agent > llm_rubric/prompt/prompt_file > module)"
        )
    if kind is None and len(problems.errors) == before:  # else a misspelt key says why
        problems.add(
            at.error(
                "has no judge: set one of builtin, check, llm_rubric, prompt, prompt_file, "
                "or module + function"
            )
        )
    common = _parse_each(entry, COMMON_KEYS, at, problems)
    score_range = common.get("score_range")
    feedback_type = common.get("feedback_type")
    if feedback_type == "bool" and score_range is not None:
        problems.add(
            at.child("feedback_type").error(
                "bool judges have no score_range; remove one of the two"
            )
        )
    whole = score_range is None or all(bound.is_integer() for bound in score_range)
    if feedback_type == "int" and not whole:
        problems.add(at.child("score_range").error("an int judge needs whole-number bounds"))
    if kind is None:
        raise ConfigErrors(problems.errors)
    own = _parse_each(entry, kind.keys, at, problems)
    problems.raise_if_any()  # the spec's rules between keys need every key read
    spec = kind.spec(own, at)
    if score_range is None and feedback_type != "bool":
        score_range = kind.default_score_range(spec)
    if score_range is None and feedback_type is None:
        feedback_type = kind.default_feedback_type(spec)
    timeout = kind.default_timeout(spec)
    if timeout is not None and "timeout" in common:
        raise at.child("timeout").error("is set by the judge's file too; keep one")
    if timeout is None:
        timeout = common.get("timeout", DEFAULT_TIMEOUT_S)
    return JudgeConfig(
        name=name,
        kind=kind.name,
        spec=spec,
        key=at.key,
        condition=common.get("if"),
        arguments=common.get("arguments", {}),
        score_range=score_range,
        feedback_type=feedback_type,
        timeout_s=timeout,
        step=common.get("step"),
    )


def _parse_each(
    entry: Mapping[str, Any], keys: Sequence[Key], at: Locator, problems: Problems
) -> dict[str, Any]:
    """parse_keys, each key on its own: a bad one is a problem, the others still read."""
    parsed: dict[str, Any] = {}
    for key in keys:
        value = problems.attempt(parse_keys, entry, (key,), at)
        if value is not None:
            parsed.update(value)
    return parsed


def _check_keys(
    entry: Mapping[str, Any],
    kind: JudgeKind | None,
    kinds: JudgeKinds,
    at: Locator,
    problems: Problems,
) -> list[str]:
    """Every key is a judge key (else a problem, one per unknown key); those of another
    kind than the judge's are returned: the kind's precedence makes them ignored
    (eval-yaml.md). The other kinds are asked only about a key that is not the judge's
    own."""
    common = {key.name for key in COMMON_KEYS}
    own = {key.name for key in kind.keys} if kind is not None else set()
    foreign = [name for name in entry if name not in common and name not in own]
    if not foreign:
        return []
    everything = common.union(*({key.name for key in other.keys} for other in kinds.every()))
    for name in foreign:
        if name not in everything:
            problems.add(
                at.child(str(name)).error(f"unknown judge key{did_you_mean(str(name), everything)}")
            )
    known = [name for name in foreign if name in everything]
    return known if kind is not None else []


def judges_schema(kinds: Sequence[JudgeKind]) -> dict[str, Any]:
    """The `judges:` list as JSON Schema, from the same keys and kinds parse_judges uses.

    An entry's kind is the first in registry order whose claim keys it sets; the keys
    of other kinds are allowed (and ignored, with a warning), so only the claiming
    kind's keys are typed. A `pairwise` entry is skipped whatever it holds.
    """
    untyped = {key.name: _kind_key_description(kind, key) for kind in kinds for key in kind.keys}
    entry = object_schema(COMMON_KEYS, null_is_absent=True)
    entry["properties"] = {**untyped, **entry["properties"]}
    entry["allOf"] = [*_scale_rules(), _kind_rules(kinds)]
    pairwise = {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"const": SUITE_LEVEL_JUDGE}},
    }
    return {
        "type": "array",
        "minItems": 1,
        "items": {"if": pairwise, "then": {}, "else": entry},
        "contains": {"not": pairwise},
        "description": "the judges; `pairwise` (suite-level) entries are skipped",
    }


def _kind_key_description(kind: JudgeKind, key: Key) -> dict[str, str]:
    """A kind's key, described but not typed: an entry of another kind may carry it."""
    described = key.field.schema().get("description")
    owner = f"{kind.name} judges"
    return {"description": f"{owner}: {described}" if described else owner}


def _kind_rules(kinds: Sequence[JudgeKind]) -> dict[str, Any]:
    """if kind 1 claims the entry then its rules, else if kind 2 ... else one is missing."""
    rule: dict[str, Any] = {
        "anyOf": [{"required": [key]} for kind in kinds for key in kind.claim_keys]
    }
    for kind in reversed(kinds):
        own = object_schema(kind.keys, additional=True, null_is_absent=True)
        rule = {
            "if": {"anyOf": [{"required": [key]} for key in kind.claim_keys]},
            "then": {"properties": own["properties"], "allOf": [kind.entry_schema()]},
            "else": rule,
        }
    return rule


def _scale_rules() -> list[dict[str, Any]]:
    """parse_judge's rules between feedback_type and score_range."""

    def when(feedback_type: str) -> dict[str, Any]:
        return {
            "required": ["feedback_type"],
            "properties": {"feedback_type": {"const": feedback_type}},
        }

    return [
        {"if": when("bool"), "then": {"properties": {"score_range": {"type": "null"}}}},
        {
            "if": when("int"),
            "then": {"properties": {"score_range": nullable({"items": {"type": "integer"}})}},
        },
    ]
