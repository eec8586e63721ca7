"""rewardkit's judge files: `judge_file: quality.toml` in an LLM judge entry.

A rewardkit judge TOML (`[judge]`, its `[[criterion]]` tables, `[scoring]`) is read
as the LLM judge keys it spells otherwise, each parsed by the same field as in
eval.yaml, so a file means here what the same keys mean there, and an error names
the file and its own key (`quality.toml: criterion[1].points: ...`):

    [judge] judge              model (an LLM; agent judges and jev do not move)
    [judge] files              files (the case files the judge grades)
    [judge] mode               mode (batched | individual)
    [judge] reasoning_effort   reasoning_effort
    [judge] reference          reference (beside the TOML)
    [judge] timeout            the judge's timeout
    [judge] samples, guard     samples, guard (penalize is zero)
    [judge] prompt_template    the rubric (its `{criteria}`: the criteria the scale lists)
    [judge] atif-trajectory    the conversation, which every LLM judge is shown
    [[criterion]]              criteria
    [scoring] aggregation      aggregate, and threshold

What rewardkit reads that has no meaning here is refused, one line naming the key
and the fix, never ignored: a weight (the reward block weighs judges), an agent
judge's keys, a model for an LLM judge (rewardkit ignores it), a reward.toml.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any

import attrs

from verifier.config.fields import Field, Locator, RelativePath, Text
from verifier.config.judges import TIMEOUT
from verifier.errors import did_you_mean
from verifier.references import HARBOR_TESTS, judge_file_path

AGENT_JUDGES = ("claude-code", "codex", "fx")  # rewardkit 0.2.3's agents.known_agents()
# [judge] keys -> the LLM judge key each is (None: read here, not a key of its own).
_JUDGE_KEYS: Mapping[str, str | None] = MappingProxyType(
    {
        "judge": "model",
        "files": "files",
        "mode": "mode",
        "reasoning_effort": "reasoning_effort",
        "samples": "samples",
        "guard": "guard",
        "reference": None,
        "timeout": None,
        "prompt_template": None,
        "atif-trajectory": None,
        "weight": None,
    }
)
# rewardkit's keys of agent judges: an LLM judge's file has no use for them.
_AGENT_KEYS = ("model", "version", "isolated", "cwd", "mcp_servers")
_SCORING_KEYS = {"aggregation": "aggregate", "threshold": "threshold"}
_TABLES = ("judge", "criterion", "scoring")
_CRITERIA_PLACEHOLDER = "{criteria}"
_CRITERIA_WORDS = "the criteria listed with the scale"


@attrs.frozen
class JudgeFile:
    """A judge TOML read: where it is, and the LLM judge keys it sets, parsed."""

    path: PurePosixPath  # relative to eval.yaml's dir
    values: Mapping[str, Any]
    timeout_s: float | None = None


@attrs.frozen
class JudgeFileField:
    """Reads the TOML with `fields`: the LLM judge's own keys' fields, by key name."""

    fields: Mapping[str, Field]
    description: str = (
        "a rewardkit judge TOML beside eval.yaml ([judge], [[criterion]], [scoring]): "
        "its keys as this judge's"
    )

    def parse(self, value: Any, at: Locator) -> JudgeFile:
        relative = RelativePath().parse(value, at)
        path = at.base_dir / relative
        if path.suffix != ".toml":
            raise at.error(f"{value!r} is not a .toml file (a rewardkit judge file)")
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise at.error(f"{path} cannot be read as TOML: {error}") from None
        toml_at = Locator(str(path), "", path.parent)
        return read_judge_file(document, relative, toml_at, at.base_dir, self.fields)

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "pattern": r"\.toml$", "description": self.description}


def read_judge_file(
    document: Mapping[str, Any],
    relative: PurePosixPath,
    at: Locator,
    config_dir: Path,
    fields: Mapping[str, Field],
) -> JudgeFile:
    """The LLM judge keys of a judge TOML's document (at: the file, its dir; relative:
    its path in config_dir, eval.yaml's dir), each read with its field in `fields`."""
    if "judge" not in document and "criterion" not in document:
        hint = (
            "rewardkit's reward aggregation: write its [[reward]] weights as eval.yaml's "
            "reward block"
            if "reward" in document or "scoring" in document
            else "a judge file has [judge] and [[criterion]] tables"
        )
        raise at.error(f"is no judge file: {hint}")
    for name in document:
        if name not in _TABLES:
            raise at.child(name).error(f"unknown table{did_you_mean(name, _TABLES)}")
    judge = _table(document, "judge", at)
    scoring = _table(document, "scoring", at)
    raw: dict[str, tuple[Any, Locator]] = {}
    for key, setting in judge.items():
        where = at.child("judge").child(key)
        if key in _AGENT_KEYS:
            raise where.error(
                f"is read by rewardkit's agent judges only; this judge is an LLM: remove {key}"
            )
        if key not in _JUDGE_KEYS:
            raise where.error(f"unknown judge key{did_you_mean(key, (*_JUDGE_KEYS, *_AGENT_KEYS))}")
        target = _JUDGE_KEYS[key]
        if target is not None:
            raw[target] = (setting, where)
    if "model" in raw:
        _refuse_agents(raw["model"][0], raw["model"][1])
    for key, setting in scoring.items():
        where = at.child("scoring").child(key)
        if key not in _SCORING_KEYS:
            raise where.error(f"unknown scoring key{did_you_mean(key, tuple(_SCORING_KEYS))}")
        raw[_SCORING_KEYS[key]] = (setting, where)
    if "criterion" not in document:
        raise at.child("criterion").error("is missing: list the judge's [[criterion]] tables")
    raw["criteria"] = (document["criterion"], at.child("criterion"))
    values = {name: fields[name].parse(setting, where) for name, (setting, where) in raw.items()}
    if "threshold" in values and values.get("aggregate") != "threshold":
        # rewardkit reads it only for aggregation = "threshold" (its default is 0.5)
        raise (
            at.child("scoring")
            .child("threshold")
            .error('is read only with aggregation = "threshold"; remove it')
        )
    weight = judge.get("weight", 1.0)
    if weight != 1.0 or isinstance(weight, bool):
        raise (
            at.child("judge")
            .child("weight")
            .error(
                f"{weight!r}: a judge's weight in the reward is eval.yaml's "
                "`reward: {weights: {NAME: W}}`; remove it here"
            )
        )
    if "reference" in judge:
        values["reference"] = _reference(judge["reference"], relative, at, config_dir)
    if "prompt_template" in judge:
        values["llm_rubric"] = _template(judge["prompt_template"], at)
    if "atif-trajectory" in judge:  # the trail is the one the verifier reads for every judge
        Text(non_empty=True).parse(judge["atif-trajectory"], at.child("judge.atif-trajectory"))
    timeout = None
    if "timeout" in judge:
        timeout = TIMEOUT.parse(judge["timeout"], at.child("judge").child("timeout"))
    return JudgeFile(relative, MappingProxyType(values), timeout)


def _reference(value: Any, toml: PurePosixPath, at: Locator, base: Path) -> PurePosixPath:
    """[judge] reference as a path in eval.yaml's dir (base): verifier.references says
    which paths a TOML may name, and how."""
    where = at.child("judge").child("reference")
    path = judge_file_path(value, toml, base) if isinstance(value, str) else None
    if isinstance(value, str) and path is None:
        raise where.error(
            f"{value!r} is outside eval.yaml's dir and {HARBOR_TESTS}: give it beside {toml.name}"
        )
    shown = value if path is None else str(path)
    return RelativePath().parse(shown, attrs.evolve(where, base_dir=base))


def _table(document: Mapping[str, Any], name: str, at: Locator) -> Mapping[str, Any]:
    table = document.get(name, {})
    if not isinstance(table, dict):
        raise at.child(name).error(f"must be a table: [{name}]")
    return table


def _refuse_agents(model: Any, at: Locator) -> None:
    if model in AGENT_JUDGES or model == "jev":
        kind = "the jev judge" if model == "jev" else f"an agent judge ({model})"
        raise at.error(
            f"{kind} does not move: the verifier asks LLMs only; give judge an LLM (provider/model)"
        )


def _template(value: Any, at: Locator) -> str:
    """prompt_template's text as the judge's rubric: rewardkit's system prompt, its
    `{criteria}` placeholder naming the criteria that the verifier lists itself."""
    where = at.child("judge").child("prompt_template")
    relative = RelativePath().parse(value, where)
    path = at.base_dir / relative
    if path.suffix not in (".txt", ".md"):
        raise where.error(f"{value!r} must be a .txt or .md file (as rewardkit's)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise where.error(f"{path} cannot be read: {error}") from None
    if _CRITERIA_PLACEHOLDER not in text:
        raise where.error(f"{path} must contain the {_CRITERIA_PLACEHOLDER} placeholder")
    if "endraw" in text:
        raise where.error(f"{path}: 'endraw' would end the plain text early; reword it")
    # Plain text, as rewardkit reads it: nothing in it is a Jinja2 tag of the rubric.
    return "{% raw %}" + text.replace(_CRITERIA_PLACEHOLDER, _CRITERIA_WORDS) + "{% endraw %}"
