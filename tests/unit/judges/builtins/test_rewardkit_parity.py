"""rewardkit's criteria move across unchanged: the same inputs through harbor-rewardkit
0.2.3's own criteria and through the builtins of the same name, the same values.

rewardkit runs in Harbor's venv (`.ci/harbor-venv.sh` installs harbor-rewardkit and
openpyxl there; it needs Python >= 3.12), through tests/rewardkit_oracle.py; the
builtins run as `verifier grade` runs them. Each row also says the value both must
give, so a change on either side fails here. The rows are the criteria's behaviours
as rewardkit's source defines them (`rewardkit/criteria/*.py`: text read with
`Path.read_text()`, universal newlines; files_equal, file_matches and diff_ratio
stripped; command output with `text=True`; openpyxl's None for an empty cell;
trajectory tool calls from every step), and the cases where this verifier differed
(issue 23). The differences that remain are deliberate and listed in
docs/migrating-from-rewardkit.md; they are not in this table.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.paths import TESTS
from verifier.engine import Limits
from verifier.grading import grade, load_eval
from verifier.results import Status

HARBOR_PYTHON = Path(os.environ.get("HARBOR_VENV", "/opt/harbor-venv")) / "bin" / "python"
ORACLE = TESTS / "rewardkit_oracle.py"
MakeCase = Callable[..., Path]


def workbook(cells: dict[str, str]) -> bytes:
    """A small real .xlsx (what openpyxl and Excel read): one sheet, each cell's XML."""
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    package = "http://schemas.openxmlformats.org/package/2006"
    parts = {
        "[Content_Types].xml": (
            f'<Types xmlns="{package}/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
            'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-'
            'officedocument.spreadsheetml.sheet.main+xml"/>'
            '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.'
            'openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>'
        ),
        "_rels/.rels": (
            f'<Relationships xmlns="{package}/relationships"><Relationship Id="rId1" '
            f'Type="{rel}/officeDocument" Target="xl/workbook.xml"/></Relationships>'
        ),
        "xl/workbook.xml": (
            f'<workbook xmlns="{main}" xmlns:r="{rel}"><sheets>'
            '<sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>'
        ),
        "xl/_rels/workbook.xml.rels": (
            f'<Relationships xmlns="{package}/relationships"><Relationship Id="rId1" '
            f'Type="{rel}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>'
        ),
        "xl/worksheets/sheet1.xml": (
            f'<worksheet xmlns="{main}"><sheetData><row r="1">{"".join(cells.values())}'
            "</row></sheetData></worksheet>"
        ),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def atif(*steps: tuple[str, list[str]]) -> str:
    """An ATIF trajectory: each step's source and the tools it called."""
    return json.dumps(
        {
            "schema_version": "ATIF-v1.2",
            "steps": [
                {
                    "step_id": index,
                    "source": source,
                    "message": "",
                    "tool_calls": [
                        {"tool_call_id": f"c{index}-{n}", "function_name": name, "arguments": {}}
                        for n, name in enumerate(tools)
                    ],
                }
                for index, (source, tools) in enumerate(steps, 1)
            ],
        }
    )


CRLF = "line one\r\nanswer: 42\r\n"
BOOK = workbook(
    {
        "A1": '<c r="A1"><v>42</v></c>',
        "B1": '<c r="B1" t="inlineStr"><is><t>total</t></is></c>',
        "C1": '<c r="C1"/>',
    }
)
TRAIL = atif(("user", []), ("agent", ["Bash"]), ("system", ["Write"]), ("agent", ["Bash"]))

# (criterion, arguments (the same for both), the case's files, the value both give)
ROWS: list[tuple[str, dict[str, Any], dict[str, str | bytes], Any]] = [
    ("file_exists", {"path": "a.txt"}, {"a.txt": "x"}, True),
    ("file_not_exists", {"path": "b.txt"}, {"a.txt": "x"}, True),
    ("file_contains", {"path": "a.txt", "text": "answer: 42"}, {"a.txt": CRLF}, True),
    ("file_contains", {"path": "a.txt", "text": "42\n"}, {"a.txt": CRLF}, True),
    ("file_contains", {"path": "a.txt", "text": "one\nanswer"}, {"a.txt": CRLF}, True),
    ("file_contains", {"path": "gone.txt", "text": "x"}, {"a.txt": CRLF}, False),
    ("file_contains_regex", {"path": "a.txt", "pattern": r"answer: \d+$"}, {"a.txt": CRLF}, True),
    ("file_contains_regex", {"path": "a.txt", "pattern": "^answer"}, {"a.txt": CRLF}, False),
    ("file_contains_regex", {"path": "a.txt", "pattern": "(?m)^answer"}, {"a.txt": CRLF}, True),
    ("file_contains_regex", {"path": "a.txt", "pattern": "one$"}, {"a.txt": CRLF}, False),
    ("file_matches", {"path": "a.txt", "expected": "line one\nanswer: 42"}, {"a.txt": CRLF}, True),
    (
        "file_matches",
        {"path": "a.txt", "expected": "  line one\nanswer: 42\n\n"},
        {"a.txt": CRLF},
        True,
    ),
    ("file_matches", {"path": "a.txt", "expected": "line one"}, {"a.txt": CRLF}, False),
    (
        "files_equal",
        {"path1": "a.txt", "path2": "b.txt"},
        {"a.txt": CRLF, "b.txt": "line one\nanswer: 42\n"},
        True,
    ),
    (
        "files_equal",
        {"path1": "a.txt", "path2": "b.txt"},
        {"a.txt": "\n  same \n\n", "b.txt": "same"},
        True,
    ),
    ("files_equal", {"path1": "a.txt", "path2": "b.txt"}, {"a.txt": "a b", "b.txt": "a  b"}, False),
    ("files_equal", {"path1": "a.txt", "path2": "gone.txt"}, {"a.txt": "x"}, False),
    ("diff_ratio", {"path": "a.txt", "expected": "line one\nanswer: 42"}, {"a.txt": CRLF}, 1.0),
    ("diff_ratio", {"path": "a.txt", "expected": "abcd"}, {"a.txt": "\n abxy \n"}, 0.5),
    (
        "diff_ratio",
        {"path": "a.txt", "expected": "roses are red"},
        {"a.txt": "roses are red\nviolets are blue\n"},
        2 * 13 / (13 + 30),
    ),
    ("diff_ratio", {"path": "gone.txt", "expected": "x"}, {"a.txt": "x"}, 0.0),
    ("command_succeeds", {"cmd": "test -f a.txt"}, {"a.txt": "x"}, True),
    ("command_succeeds", {"cmd": "exit 3"}, {"a.txt": "x"}, False),
    ("command_output_contains", {"cmd": "cat a.txt", "text": "42\n"}, {"a.txt": CRLF}, True),
    (
        "command_output_matches",
        {"cmd": "cat a.txt", "expected": "line one\nanswer: 42"},
        {"a.txt": CRLF},
        True,
    ),
    (
        "command_output_matches",
        {"cmd": "cat a.txt; echo more", "expected": "answer: 42"},
        {"a.txt": "answer: 42\n"},
        False,
    ),
    (
        "command_output_matches_regex",
        {"cmd": "cat a.txt", "pattern": r"answer: \d+$"},
        {"a.txt": CRLF},
        True,
    ),
    (
        "command_output_matches_regex",
        {"cmd": "cat a.txt", "pattern": "^answer"},
        {"a.txt": CRLF},
        False,
    ),
    (
        "json_key_equals",
        {"path": "a.json", "key": "n", "expected": 2},
        {"a.json": '{"n": 2.0}'},
        True,
    ),
    ("json_key_equals", {"path": "a.json", "key": "n", "expected": 2}, {"a.json": "[1]"}, False),
    (
        "json_path_equals",
        {"path": "a.json", "json_path": "items.1.id", "expected": "b"},
        {"a.json": '{"items": [{"id": "a"}, {"id": "b"}]}'},
        True,
    ),
    (
        "json_path_equals",
        {"path": "a.json", "json_path": "items.5.id", "expected": "b"},
        {"a.json": '{"items": [{"id": "a"}]}'},
        False,
    ),
    (
        "csv_cell_equals",
        {"path": "a.csv", "row": 0, "col": "name", "expected": "x"},
        {"a.csv": "name,n\r\nx,1\r\n"},
        True,
    ),
    (
        "csv_cell_equals",
        {"path": "a.csv", "row": 1, "col": 1, "expected": "1"},
        {"a.csv": "name,n\nx,1\n"},
        True,
    ),
    ("xlsx_cell_equals", {"path": "b.xlsx", "cell": "A1", "expected": 42}, {"b.xlsx": BOOK}, True),
    (
        "xlsx_cell_equals",
        {"path": "b.xlsx", "cell": "B1", "expected": "total"},
        {"b.xlsx": BOOK},
        True,
    ),
    (
        "xlsx_cell_equals",
        {"path": "b.xlsx", "cell": "C1", "expected": None},
        {"b.xlsx": BOOK},
        True,
    ),
    (
        "xlsx_cell_equals",
        {"path": "b.xlsx", "cell": "Z9", "expected": None},
        {"b.xlsx": BOOK},
        True,
    ),
    (
        "xlsx_cell_equals",
        {"path": "b.xlsx", "cell": "A1", "expected": None},
        {"b.xlsx": BOOK},
        False,
    ),
    ("trajectory_tool_used", {"tool_name": "Bash", "min_count": 2}, {"t.json": TRAIL}, True),
    ("trajectory_tool_used", {"tool_name": "Write"}, {"t.json": TRAIL}, True),
    ("trajectory_tool_not_used", {"tool_name": "Write"}, {"t.json": TRAIL}, False),
    ("trajectory_tool_not_used", {"tool_name": "Read"}, {"t.json": TRAIL}, True),
    ("trajectory_turn_count", {"max_turns": 2}, {"t.json": TRAIL}, 1.0),
    ("trajectory_turn_count", {"max_turns": 1}, {"t.json": TRAIL}, 0.0),
    ("trajectory_turn_count", {"max_turns": 4}, {"t.json": atif(*[("agent", [])] * 6)}, 0.5),
    ("trajectory_tool_not_used", {"tool_name": "Read"}, {"a.txt": "no trail"}, False),
]

TRAJECTORY_CRITERIA = ("trajectory_tool_used", "trajectory_tool_not_used", "trajectory_turn_count")


def rewardkit_arguments(criterion: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """rewardkit's trajectory criteria take an absolute path (default /logs/agent/...)."""
    if criterion in TRAJECTORY_CRITERIA:
        return {**arguments, "path": "{workspace}/t.json"}
    return arguments


@pytest.fixture(scope="module")
def rewardkit_values() -> list[Any]:
    """Every row through rewardkit itself, in one process."""
    probe = (
        subprocess.run(
            [str(HARBOR_PYTHON), "-c", "import rewardkit, openpyxl"],
            capture_output=True,
            check=False,
        )
        if HARBOR_PYTHON.exists()
        else None
    )
    if probe is None or probe.returncode != 0:
        missing = f"harbor-rewardkit and openpyxl in {HARBOR_PYTHON} (.ci/harbor-venv.sh)"
        pytest.fail(missing) if os.environ.get("CI") else pytest.skip(missing)
    rows = [
        {
            "criterion": criterion,
            "kwargs": rewardkit_arguments(criterion, arguments),
            "files": {
                name: {"base64": base64.b64encode(content).decode()}
                if isinstance(content, bytes)
                else content
                for name, content in files.items()
            },
        }
        for criterion, arguments, files, _ in ROWS
    ]
    completed = subprocess.run(
        [str(HARBOR_PYTHON), str(ORACLE)],
        input=json.dumps(rows),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def verifier_value(
    tmp_path: Path,
    index: int,
    criterion: str,
    arguments: dict[str, Any],
    files: dict[str, str | bytes],
) -> Any:
    case = tmp_path / f"case-{index}"
    case.mkdir()
    for name, content in files.items():
        (case / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    if criterion in TRAJECTORY_CRITERIA and "t.json" in files:
        arguments = {**arguments, "path": "t.json"}
    config = tmp_path / f"eval-{index}.yaml"
    config.write_text(
        f"judges:\n  - name: j\n    builtin: {criterion}\n    arguments: {json.dumps(arguments)}\n"
    )
    (result,) = grade(load_eval(config), case, Limits()).results
    assert result.status is Status.OK, result.error
    return result.value


@pytest.mark.slow
@pytest.mark.parametrize(
    ("index", "row"), list(enumerate(ROWS)), ids=[f"{row[0]}-{n}" for n, row in enumerate(ROWS)]
)
def test_a_criterion_gives_what_rewardkit_gives(
    rewardkit_values: list[Any], tmp_path: Path, index: int, row: tuple
) -> None:
    criterion, arguments, files, expected = row
    theirs = rewardkit_values[index]
    ours = verifier_value(tmp_path, index, criterion, arguments, files)
    assert theirs == pytest.approx(expected), f"rewardkit gives {theirs!r}"
    assert ours == pytest.approx(expected), f"this verifier gives {ours!r}"
    assert type(ours) is type(theirs) or {type(ours), type(theirs)} <= {int, float}
