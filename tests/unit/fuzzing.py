"""Hypothesis strategies for what a hostile agent can leave: documents of every shape.

Each strategy aims at the readers' own keys and edges (ATIF steps, agent-eval-harness
events, pytest-json and go-json reports, JUnit XML, workbooks, YAML with dates and
tags, JSON nested past any recursion limit, numbers past any float) with arbitrary
values in between, so a property test reaches the branches a crash would hide in.

`FUZZ` is the settings every fuzz test uses: derandomized (the same examples on every
run and in CI, no example database), no per-example deadline (the tests assert their
own time bound, which a loaded machine does not flake on).
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=40,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)

# The keys the readers look up, so that random mappings hit their branches.
KEYS = (
    "steps",
    "source",
    "agent",
    "user",
    "message",
    "tool_calls",
    "function_name",
    "tool_call_id",
    "arguments",
    "observation",
    "results",
    "source_call_id",
    "content",
    "metrics",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "final_metrics",
    "total_cost_usd",
    "total_prompt_tokens",
    "total_completion_tokens",
    "type",
    "assistant",
    "text",
    "tools",
    "name",
    "id",
    "input",
    "tool_result",
    "tool_use_id",
    "is_error",
    "result",
    "parent_tool_use_id",
    "tests",
    "nodeid",
    "outcome",
    "summary",
    "collectors",
    "passed",
    "failed",
    "error",
    "skipped",
    "Action",
    "Package",
    "Test",
    "FailedBuild",
    "ImportPath",
    "key",
    "items",
    "0",
    "-1",
    "a",
    "b",
    "prompt",
    "expected_files",
    "item",
    "item.completed",
    "agent_message",
    "file_path",
    "path",
    "read_paths",
    "Read",
    "Grep",
    "Bash",
)
# Text a model, a regex or a fence could trip on.
HOSTILE_TEXT = (
    "",
    " ",
    "\0",
    "\ud800",
    "\ufeff",
    "\u202e",
    "\ue000",
    "\ue0010.0\ue001",
    "error: boom",
    "</case-material-0>",
    "</CASE-MATERIAL-abc>",
    "<task-input>",
    "</reference-material>",
    "< / task-input >",
    "\uff1c/task-input\uff1e",
    "{{ outputs }}",
    "{% raw %}",
    "${HOME}",
    "$(id)",
    "a" * 5000,
    "日本語のテキスト" * 50,
    "\r\n",
    "\n" * 100,
    "NaN",
    "1e999",
    "-0",
)
ATOMS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(HOSTILE_TEXT),
    st.sampled_from(KEYS),
)
JSON_VALUES = st.recursive(
    ATOMS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), children, max_size=5
        ),
    ),
    max_leaves=25,
)


def maybe(key: str, values: st.SearchStrategy[Any]) -> dict[str, st.SearchStrategy[Any]]:
    return {key: st.one_of(values, JSON_VALUES)}


ATIF_STEP = st.fixed_dictionaries(
    {"source": st.one_of(st.sampled_from(["agent", "user", "system"]), JSON_VALUES)},
    optional={
        **maybe("message", st.text(max_size=30)),
        **maybe(
            "tool_calls",
            st.lists(
                st.fixed_dictionaries(
                    {"function_name": st.one_of(st.sampled_from(["Read", "Bash"]), JSON_VALUES)},
                    optional={"tool_call_id": JSON_VALUES, "arguments": JSON_VALUES},
                ),
                max_size=3,
            ),
        ),
        **maybe(
            "observation",
            st.fixed_dictionaries(
                {
                    "results": st.lists(
                        st.fixed_dictionaries(
                            {}, optional={"source_call_id": JSON_VALUES, "content": JSON_VALUES}
                        ),
                        max_size=3,
                    )
                }
            ),
        ),
        **maybe(
            "metrics",
            st.dictionaries(
                st.sampled_from(["prompt_tokens", "completion_tokens", "cost_usd"]), JSON_VALUES
            ),
        ),
    },
)
ATIF = st.fixed_dictionaries(
    {"steps": st.lists(st.one_of(ATIF_STEP, JSON_VALUES), max_size=5)},
    optional={
        "final_metrics": st.one_of(
            JSON_VALUES,
            st.dictionaries(
                st.sampled_from(
                    ["total_cost_usd", "total_prompt_tokens", "total_completion_tokens"]
                ),
                JSON_VALUES,
            ),
        )
    },
)
EVENT = st.fixed_dictionaries(
    {
        "type": st.one_of(
            st.sampled_from(["assistant", "tool_result", "result", "user"]), JSON_VALUES
        )
    },
    optional=dict.fromkeys(
        (
            "text",
            "tools",
            "tool_use_id",
            "content",
            "is_error",
            "cost_usd",
            "parent_tool_use_id",
            "message",
            "total_cost_usd",
        ),
        JSON_VALUES,
    ),
)
PYTEST_JSON = st.fixed_dictionaries(
    {},
    optional={
        "tests": st.one_of(
            JSON_VALUES,
            st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "nodeid": st.one_of(st.text(max_size=10), JSON_VALUES),
                        "outcome": st.one_of(
                            st.sampled_from(["passed", "failed", "error", "xfailed"]), JSON_VALUES
                        ),
                    },
                ),
                max_size=4,
            ),
        ),
        "summary": JSON_VALUES,
        "collectors": JSON_VALUES,
    },
)
GO_EVENT = st.fixed_dictionaries(
    {"Action": st.one_of(st.sampled_from(["run", "pass", "fail", "skip", "output"]), JSON_VALUES)},
    optional=dict.fromkeys(("Package", "Test", "FailedBuild", "ImportPath"), JSON_VALUES),
)


def _deep(depth: int, kind: str) -> str:
    """JSON nested depth levels: a list, or an object, past any recursion limit."""
    return "[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "0" + "}" * depth


DEEP_JSON = st.builds(
    _deep, st.integers(min_value=500, max_value=120_000), st.sampled_from(["list", "object"])
)
YAML_VALUES = (
    "{2020-01-01: x}",
    "[2020-01-01, {? [1]: 2}]",
    "!!set {x, y}",
    "{1.5: x, null: y, true: z}",
    "2020-01-01 10:00:00",
    "1e999",
    "0x" + "f" * 5000,
    "9" * 5000,
    ".nan",
    "!custom tag",
    "&x [*x]",
    "[1]",
    "!!binary AAAA",
    "!!python/object:os.system",
    "{? [a, b]: 1}",
    "~",
    "[" * 300 + "]" * 300,
    "&a {<<: *a}",
    "'unterminated",
    "[1, 2",
    "|\n  a block\n  of text",
)
YAML_LINES = (
    "2020-01-01: a date key",
    "? [a, b]\n: a list key",
    "b: &x [*x]",
    "1: int key",
    "true: bool key",
    "2001-12-14t21:59:43.10-05:00: time",
    "? null\n: 1",
    "prompt: do it",
    "- a list",
    "c: {x: [1, {y: 2}]}",
)
YAML_TEXT = st.builds(
    lambda value, others: "\n".join([f"a: {value}", *others]),
    st.sampled_from(YAML_VALUES),
    st.lists(st.sampled_from(YAML_LINES), max_size=3, unique=True),
)


def _testcase(name: Any, child: str) -> str:
    return f"<testcase name={json.dumps(str(name))[:40]}>{child}</testcase>"


JUNIT = st.builds(
    lambda root, cases, head: f"{head}<{root}>{''.join(cases)}</{root}>",
    st.sampled_from(["testsuites", "testsuite", "html"]),
    st.lists(
        st.builds(
            _testcase,
            ATOMS,
            st.sampled_from(
                [
                    "",
                    "<failure/>",
                    "<error/>",
                    "<skipped/>",
                    "<testcase name='x'/>",
                    "&undefined;",
                    "<failure>" + "x" * 100 + "</failure>",
                ]
            ),
        ),
        max_size=4,
    ),
    st.sampled_from(["", '<?xml version="1.0"?>', '<!DOCTYPE x [<!ENTITY a "b">]>']),
)


def _workbook(cell_xml: str, strings_xml: str, sheets: str) -> bytes:
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    relationships = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as workbook:
        workbook.writestr(
            "xl/workbook.xml",
            f'<workbook xmlns="{main}" xmlns:r='
            f'"{relationships}"><sheets>{sheets}</sheets></workbook>',
        )
        workbook.writestr(
            "xl/_rels/workbook.xml.rels",
            "<Relationships><Relationship "
            'Id="rId1" Target="worksheets/sheet1.xml"/></Relationships>',
        )
        workbook.writestr(
            "xl/worksheets/sheet1.xml",
            f'<worksheet xmlns="{main}"><sheetData><row>{cell_xml}</row></sheetData></worksheet>',
        )
        workbook.writestr("xl/sharedStrings.xml", f'<sst xmlns="{main}">{strings_xml}</sst>')
    return buffer.getvalue()


CELL_XML = st.builds(
    lambda kind, value: f'<c r="A1" t="{kind}"><v>{value}</v></c>',
    st.sampled_from(["n", "s", "b", "str", "e", "inlineStr", "weird"]),
    st.one_of(
        st.sampled_from(["1", "-1", "1e999", "nan", "x", "9" * 5000, "99999999"]),
        st.text(alphabet="0123456789.-eE", max_size=12),
    ),
)
SHEETS = st.sampled_from(
    [
        '<sheet name="Sheet1" r:id="rId1"/>',
        '<sheet name="Sheet1" r:id="rId9"/>',
        "",
        '<sheet name="S" r:id="rId1"/><sheet name="Sheet1" r:id="rId1"/>',
    ]
)


@st.composite
def workbooks(draw: st.DrawFn) -> bytes:
    """A workbook with a fuzzed cell, strings and sheets; often with bytes overwritten
    (a corrupt deflate stream, a bad CRC, a cut central directory)."""
    data = bytearray(
        _workbook(
            draw(CELL_XML),
            draw(st.sampled_from(["", "<si><t>a</t></si>", "<si><t>b</t></si>" * 3])),
            draw(SHEETS),
        )
    )
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        offset = draw(st.integers(min_value=0, max_value=len(data) - 1))
        data[offset] = draw(st.integers(min_value=0, max_value=255))
    if draw(st.booleans()):
        data = data[: draw(st.integers(min_value=0, max_value=len(data)))]
    return bytes(data)


def lines(values: list[Any]) -> str:
    return "\n".join(v if isinstance(v, str) else json.dumps(v) for v in values)


def to_bytes(text: str) -> bytes:
    """text as a file holds it (a lone surrogate as the bytes Python would write)."""
    return text.encode("utf-8", "surrogatepass")


DOCUMENTS = st.one_of(
    JSON_VALUES.map(json.dumps),
    ATIF.map(json.dumps),
    st.lists(EVENT, max_size=5).map(json.dumps),
    st.lists(st.one_of(EVENT, st.sampled_from(HOSTILE_TEXT), DEEP_JSON), max_size=5).map(lines),
    PYTEST_JSON.map(json.dumps),
    st.lists(
        st.one_of(GO_EVENT, st.sampled_from(["FAIL\tp [build failed]", "ok p"])), max_size=5
    ).map(lines),
    JUNIT,
    YAML_TEXT,
    DEEP_JSON,
    st.sampled_from(HOSTILE_TEXT),
    st.text(max_size=200),
).map(to_bytes)
# Every document as bytes, workbooks and raw bytes too.
CONTENTS = st.one_of(DOCUMENTS, workbooks(), st.binary(max_size=300))
