"""What `harbor view` accepts as reward-details.json, as its trial page checks it.

The viewer renders the file only when every top-level value validates (Harbor 0.26,
viewer/static/assets/trial-*.js: a reward {kind, score, criteria: [{name, value,
weight}], warnings?, judge_output?}, a list of them, or a group {kind: group, score,
aggregation, threshold?, components: [{name, weight, detail}]}); otherwise it shows
raw JSON. Shared by the unit tests and the Harbor trials.
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
