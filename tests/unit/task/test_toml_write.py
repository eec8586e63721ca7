"""verifier.task.toml_write: what tomllib reads, written back so that it reads the same
(`task import` keeps every key of a task's task.toml this way)."""

from __future__ import annotations

import datetime
import math
import tomllib
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from verifier.task.toml_write import dumps

# The shapes published Harbor tasks have (written here, not copied): deprecated keys,
# empty tables, authors as an array of tables, metadata of every type, steps.
TASK_TOML = """\
schema_version = "1.1"
artifacts = []

[task]
name = "org/some-task"
description = "A task with \\"quotes\\" and unicode: \u00e9\u00e8"
keywords = ["build-tools", "c"]
[[task.authors]]
name = "A. Author"
email = "a@example.com"
[[task.authors]]
name = "B. Author"

[metadata]
difficulty = "medium"
expert_time_estimate_min = 90.0
junior_time_estimate_min = 270
tags = ["x", "y"]
created = 2025-10-31T12:00:00Z
"odd key" = { nested = [1, 2.5, "three", { four = true }] }

[verifier]
timeout_sec = 900.0

[agent]
timeout_sec = 900.0

[environment]
build_timeout_sec = 600.0
docker_image = "org/image:20251031"
cpus = 1
memory_mb = 2048
allow_internet = true
mcp_servers = []

[verifier.env]

[environment.env]
TOKEN = "${TOKEN:-none}"

[solution.env]

[[steps]]
name = "one"
[steps.agent]
timeout_sec = 10.0
"""


def test_a_harbor_task_toml_reads_the_same_after_writing() -> None:
    document = tomllib.loads(TASK_TOML)
    assert tomllib.loads(dumps(document)) == document


def test_the_layout_is_tables_after_keys_and_empty_tables_kept() -> None:
    text = dumps({"b": {"x": 1}, "a": 1, "c": {}, "d": {"e": {"f": 2}}, "g": [{"h": 1}]})
    assert text == "a = 1\n\n[b]\nx = 1\n\n[c]\n\n[d.e]\nf = 2\n\n[[g]]\nh = 1\n"


def test_special_floats_and_odd_keys() -> None:
    written = dumps({"x y": math.inf, "n": -math.inf, "z": math.nan, "": "empty key"})
    read = tomllib.loads(written)
    assert read["x y"] == math.inf and read["n"] == -math.inf and math.isnan(read["z"])
    assert read[""] == "empty key"


_keys = st.text(min_size=0, max_size=8)
_scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.dates(),
    st.datetimes(timezones=st.sampled_from([None, datetime.UTC])),
    st.times(),
)


def _values(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
        max_leaves=12,
    )


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _values(_scalars), max_size=6))
@example({"0\n": []})  # a key ending in a newline is quoted (found by this test)
def test_any_document_reads_the_same_after_writing(document: dict[str, Any]) -> None:
    assert tomllib.loads(dumps(document)) == document
