"""What `harbor view` accepts as reward-details.json and ctrf.json, as its trial page
checks them.

The viewer renders reward-details.json only when every top-level value validates
(Harbor 0.26, viewer/static/assets/trial-*.js: a reward {kind, score, criteria: [{name,
value, weight}], warnings?, judge_output?}, a list of them, or a group {kind: group,
score, aggregation, threshold?, components: [{name, weight, detail}]}), and ctrf.json
only when its zod schema parses it (the same file: reportFormat "CTRF"?, results: {tool:
{name}, summary: {tests, passed, failed, skipped, pending, other, start, stop}, tests:
[{name, status, duration, ...}]}); otherwise it shows raw JSON. Shared by the unit tests
and the Harbor trials.
"""

from __future__ import annotations

from typing import Any


def viewer_accepts(details: Any) -> bool:
    """harbor view's check (trial page JS) before it renders reward-details.json."""

    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    def criterion(c: Any) -> bool:
        return (
            isinstance(c, dict)
            and isinstance(c.get("name"), str)
            and number(c.get("value"))
            and number(c.get("weight"))
        )

    def reward(r: Any) -> bool:
        return (
            isinstance(r, dict)
            and isinstance(r.get("kind"), str)
            and number(r.get("score"))
            and isinstance(r.get("criteria"), list)
            and all(map(criterion, r["criteria"]))
            and (
                r.get("warnings") is None
                or (
                    isinstance(r["warnings"], list)
                    and all(isinstance(w, str) for w in r["warnings"])
                )
            )
            and (r.get("judge_output") is None or isinstance(r["judge_output"], str))
        )

    def group(g: Any) -> bool:
        return (
            isinstance(g, dict)
            and g.get("kind") == "group"
            and number(g.get("score"))
            and isinstance(g.get("aggregation"), str)
            and (g.get("threshold") is None or number(g["threshold"]))
            and isinstance(g.get("components"), list)
            and all(
                isinstance(c, dict)
                and isinstance(c.get("name"), str)
                and number(c.get("weight"))
                and detail(c.get("detail"))
                for c in g["components"]
            )
        )

    def detail(d: Any) -> bool:
        if isinstance(d, list):
            return all(map(reward, d))
        return reward(d) or group(d)

    return isinstance(details, dict) and all(map(detail, details.values()))


CTRF_STATUSES = ("passed", "failed", "skipped", "pending", "other")
_CTRF_SUMMARY = ("tests", "passed", "failed", "skipped", "pending", "other", "start", "stop")
_CTRF_OPTIONAL = {
    "id": str,
    "message": str,
    "trace": str,
    "snippet": str,
    "rawStatus": str,
    "type": str,
    "filePath": str,
    "start": (int, float),
    "stop": (int, float),
    "line": (int, float),
    "retries": (int, float),
    "flaky": bool,
}


def ctrf_viewer_accepts(document: Any) -> bool:
    """harbor view's zod schema for ctrf.json (trial page JS), the keys it types."""

    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    def strings(value: Any, minimum: int = 0) -> bool:
        return (
            isinstance(value, list)
            and len(value) >= minimum
            and all(isinstance(item, str) for item in value)
        )

    def test(entry: Any) -> bool:
        if not isinstance(entry, dict):
            return False
        if not (isinstance(entry.get("name"), str) and entry["name"]):
            return False
        if entry.get("status") not in CTRF_STATUSES or not number(entry.get("duration")):
            return False
        suite = entry.get("suite")
        if suite is not None and not (isinstance(suite, str) or strings(suite, 1)):
            return False
        for key, kind in _CTRF_OPTIONAL.items():
            value = entry.get(key)
            if value is not None and (
                not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))
            ):
                return False
        return all(
            entry.get(key) is None or strings(entry[key]) for key in ("tags", "stdout", "stderr")
        )

    if not isinstance(document, dict) or document.get("reportFormat", "CTRF") != "CTRF":
        return False
    results = document.get("results")
    if not isinstance(results, dict):
        return False
    tool, summary, tests = results.get("tool"), results.get("summary"), results.get("tests")
    return (
        isinstance(tool, dict)
        and isinstance(tool.get("name"), str)
        and bool(tool["name"])
        and isinstance(summary, dict)
        and all(number(summary.get(key)) for key in _CTRF_SUMMARY)
        and isinstance(tests, list)
        and all(map(test, tests))
    )
