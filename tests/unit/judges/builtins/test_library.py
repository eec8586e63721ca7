"""The builtin library: rewardkit's criteria, reference files, tamper guards, the agent's
trail, agent-eval-harness's builtins; each on real files, and each hostile variant a
failure with the fact, never an error."""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import sqlite3
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.paths import REPO
from tests.unit.conftest import write_files
from verifier.batch.grader import config_hash
from verifier.console import signal_name
from verifier.engine import Limits
from verifier.errors import ConfigError
from verifier.grading import grade, load_eval
from verifier.judges.builtins import all_builtins
from verifier.results import JudgeResult, Status

MakeCase = Callable[..., Path]
DOCS = REPO / "docs" / "builtins.md"
Files = dict[str, str | bytes]


class Grader:
    """Grades one builtin judge: eval.yaml and its reference files in one dir, each case
    in a dir of its own."""

    def __init__(self, tmp_path: Path, make_case: MakeCase) -> None:
        self.config_dir = tmp_path / "config"
        self.config_dir.mkdir()
        self.make_case = make_case
        self.counter = itertools.count()

    def config(
        self, builtin: str, arguments: str, references: Files | None = None, extra: str = ""
    ) -> Path:
        write_files(self.config_dir, references or {})
        path = self.config_dir / f"eval{next(self.counter)}.yaml"
        path.write_text(
            f"judges:\n  - name: j\n    builtin: {builtin}\n    arguments: {arguments}\n{extra}"
        )
        return path

    def case(self, files: Files) -> Path:
        return self.make_case(files, name=f"case{next(self.counter)}")

    def __call__(
        self,
        builtin: str,
        arguments: str,
        case: Files | Path,
        references: Files | None = None,
        extra: str = "",
        limits: Limits | None = None,
    ) -> JudgeResult:
        config = self.config(builtin, arguments, references, extra)
        case_dir = case if isinstance(case, Path) else self.case(case)
        result = grade(load_eval(config), case_dir, limits=limits or Limits()).results[0]
        assert result.status is Status.OK, result.error
        return result


@pytest.fixture
def run(tmp_path: Path, make_case: MakeCase) -> Grader:
    return Grader(tmp_path, make_case)


# --- rewardkit's file criteria --------------------------------------------------------

FILES = {
    "out.txt": "answer: 42\n",
    "copy.txt": "answer: 42\n",
    "crlf.txt": "answer: 42\r\n",
    "spaced.txt": "answer:   42\n\n",
}


@pytest.mark.parametrize(
    ("builtin", "arguments", "value"),
    [
        ("file_not_exists", "{path: gone.txt}", True),
        ("files/file_not_exists", "{path: out.txt}", False),
        ("file_contains_regex", "{path: out.txt, pattern: 'ans\\w+: 4\\d'}", True),
        ("file_contains_regex", "{path: out.txt, pattern: '^answer: 41$'}", False),
        ("file_matches", "{path: out.txt, expected: '  answer: 42 '}", True),
        ("file_matches", "{path: out.txt, expected: 'answer: 4'}", False),
        ("file_matches", "{path: out.txt, pattern: 'answer'}", True),
        ("files_equal", "{path1: out.txt, path2: copy.txt}", True),
        ("files_equal", "{path1: out.txt, path2: crlf.txt}", True),  # universal newlines
        ("files_equal", "{path1: out.txt, path2: crlf.txt, ignore_line_endings: true}", True),
        ("files_equal", "{path1: spaced.txt, reference: ref/out.txt}", False),
        (
            "files_equal",
            "{path1: spaced.txt, reference: ref/out.txt, ignore_whitespace: true}",
            True,
        ),
        ("files_equal", "{path1: out.txt, reference: ref/out.txt}", True),
        ("files_equal", "{path1: out.txt, path2: gone.txt}", False),
    ],
)
def test_file_criteria(run: Grader, builtin: str, arguments: str, value: bool) -> None:
    result = run(builtin, arguments, FILES, {"ref/out.txt": "answer: 42\n"})
    assert result.value is value, result.rationale


def test_a_dangling_link_or_a_link_out_of_the_case_is_not_absence(
    run: Grader, tmp_path: Path
) -> None:
    case = run.case({"x.txt": "x"})
    (case / "dangling").symlink_to("nowhere")
    (case / "outside").symlink_to(tmp_path / "elsewhere")
    assert run("file_not_exists", "{path: dangling}", case).value is False
    assert run("file_not_exists", "{path: outside}", case).value is False


def test_files_equal_says_where_the_files_first_differ(run: Grader) -> None:
    result = run(
        "files_equal",
        "{path1: a.txt, path2: b.txt}",
        {"a.txt": "one\ntwo\n", "b.txt": "one\ntoo\n"},
    )
    assert (result.value, result.rationale) == (
        False,
        "a.txt differs from b.txt: first at line 2, column 2: 'wo' instead of 'oo'",
    )


def test_diff_ratio_is_partial_credit(run: Grader) -> None:
    case = {"poem.txt": "roses are red\nviolets are blue\n"}
    reference = {"poem.txt": "roses are red\nviolets are blue\n"}
    assert run("diff_ratio", "{path: poem.txt, reference: poem.txt}", case, reference).value == 1.0
    half = run("diff_ratio", "{path: poem.txt, expected: 'roses are red\n'}", case).value
    assert half == pytest.approx(2 * 13 / (30 + 13))  # the texts stripped, as rewardkit's
    assert run("diff_ratio", "{path: missing.txt, expected: x}", case).value == 0.0


def test_partial_credit_is_the_reward_without_a_declared_score_range(run: Grader) -> None:
    """A builtin's fraction is on its own [0, 1] scale: on the default [1, 5] a pass rate of
    0.5 would normalize to 0 and every partial solution would score nothing."""
    config = run.config("diff_ratio", "{path: a.txt, expected: abcd}")
    graded = grade(load_eval(config), run.case({"a.txt": "abxy"}))
    assert graded.results[0].value == 0.5
    assert graded.reward == 0.5


def test_diff_ratio_of_big_files_is_by_lines(run: Grader) -> None:
    lines = [f"line {n}" for n in range(5000)]
    case = {"big.txt": "\n".join(lines)}
    reference = {"big.txt": "\n".join(lines[:2500] + ["changed"] * 2500)}
    result = run("diff_ratio", "{path: big.txt, reference: big.txt}", case, reference)
    assert result.value == pytest.approx(0.5)
    assert result.rationale.endswith("(by lines)")


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ("{path1: a.txt}", "files_equal needs exactly one of path2, reference"),
        (
            "{path1: a.txt, path2: b.txt, reference: r.txt}",
            "files_equal needs exactly one of path2, reference (got path2, reference)",
        ),
        ("{path1: a.txt, reference: nothere.txt}", "nothere.txt not found"),
        ("{path1: a.txt, reference: ../outside.txt}", "must be a path relative to eval.yaml's dir"),
        ("{path1: a.txt, reference: refdir}", "is not a file"),
    ],
)
def test_reference_files_are_checked_at_load(run: Grader, arguments: str, problem: str) -> None:
    config = run.config("files_equal", arguments, {"r.txt": "x", "refdir/f": "y"})
    with pytest.raises(ConfigError, match=re.escape(problem)):
        load_eval(config)


def test_reference_files_are_in_the_batch_resume_key(run: Grader) -> None:
    config = run.config(
        "files_equal", "{path1: a.txt, reference: ref/expected.txt}", {"ref/expected.txt": "v1"}
    )
    before = config_hash(config, Limits())
    (config.parent / "ref/expected.txt").write_text("v2")
    assert config_hash(config, Limits()) != before


# --- data formats ---------------------------------------------------------------------

DATA = {
    "r.json": json.dumps({"status": "done", "a.b": 1, "items": [{"id": 7}], "ok": True}),
    "c.yaml": "server:\n  port: 8080\n  hosts: [a, b]\n",
    "t.csv": "name,score\nada,91\nbob,77.5\n",
}


@pytest.mark.parametrize(
    ("builtin", "arguments", "value"),
    [
        ("json_key_equals", "{path: r.json, key: status, expected: done}", True),
        ("json_key_equals", "{path: r.json, key: a.b, expected: 1}", True),
        ("json_key_equals", "{path: r.json, key: ok, expected: 1}", False),
        ("json_path_equals", "{path: r.json, json_path: items.0.id, expected: 7}", True),
        ("json_path_equals", "{path: r.json, key: items.0.id, expected: 7.0}", True),
        ("yaml_path_equals", "{path: c.yaml, yaml_path: server.port, expected: 8080}", True),
        ("yaml/yaml_path_equals", "{path: c.yaml, yaml_path: server.hosts.1, expected: b}", True),
        ("yaml_path_equals", "{path: c.yaml, yaml_path: server.name, expected: x}", False),
        ("csv_cell_equals", "{path: t.csv, row: 0, col: 1, expected: score}", True),
        ("csv_cell_equals", "{path: t.csv, row: 1, col: 1, expected: 91}", True),
        ("csv_cell_equals", "{path: t.csv, row: 1, col: score, expected: 77.5}", True),
        ("csv_cell_equals", "{path: t.csv, row: 0, col: name, expected: ada}", True),
        ("csv_cell_equals", "{path: t.csv, row: 0, col: name, expected: bob}", False),
        ("csv_cell_equals", "{path: t.csv, row: 9, col: 0, expected: ada}", False),
        ("csv_cell_equals", "{path: t.csv, row: 0, col: grade, expected: ada}", False),
    ],
)
def test_data_criteria(run: Grader, builtin: str, arguments: str, value: bool) -> None:
    result = run(builtin, arguments, DATA)
    assert result.value is value, result.rationale


def sqlite_bytes(tmp_path: Path, *statements: str, wal: bool = False) -> bytes:
    path = tmp_path / f"db{len(list(tmp_path.glob('db*')))}.sqlite"
    connection = sqlite3.connect(path)
    if wal:
        connection.execute("PRAGMA journal_mode=WAL")
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()
    return path.read_bytes()


@pytest.mark.parametrize("wal", [False, True])
def test_sqlite_query_equals(run: Grader, tmp_path: Path, wal: bool) -> None:
    db = sqlite_bytes(
        tmp_path,
        "CREATE TABLE t (name TEXT, n INTEGER)",
        "INSERT INTO t VALUES ('a', 1), ('b', 2)",
        wal=wal,
    )
    case = {"app.db": db}
    assert (
        run(
            "sqlite_query_equals",
            "{db_path: app.db, query: 'SELECT count(*) FROM t', expected: 2}",
            case,
        ).value
        is True
    )
    assert (
        run(
            "sqlite_query_equals",
            "{db_path: app.db, query: 'SELECT name FROM t ORDER BY n', expected: [a, b]}",
            case,
        ).value
        is True
    )
    assert (
        run(
            "sqlite_query_equals",
            "{db_path: app.db, query: 'SELECT name, n FROM t "
            "ORDER BY n', expected: [[a, 1], [b, 2]]}",
            case,
        ).value
        is True
    )
    assert (
        run(
            "sqlite_query_equals",
            "{db_path: app.db, query: 'SELECT n = 1 FROM t LIMIT 1', expected: true}",
            case,
        ).value
        is True
    )
    wrong = run(
        "sqlite_query_equals", "{db_path: app.db, query: 'SELECT max(n) FROM t', expected: 3}", case
    )
    assert (wrong.value, wrong.rationale) == (False, "app.db: the query returned 2, expected 3")


def test_a_query_cannot_write_the_agents_database(run: Grader, tmp_path: Path) -> None:
    case = run.case({"app.db": sqlite_bytes(tmp_path, "CREATE TABLE t (n INTEGER)")})
    before = (case / "app.db").read_bytes()
    result = run(
        "sqlite_query_equals", "{db_path: app.db, query: 'DELETE FROM t', expected: 0}", case
    )
    assert result.value is False
    assert "readonly" in result.rationale or "read-only" in result.rationale
    assert (case / "app.db").read_bytes() == before


def test_a_query_the_database_makes_endless_is_a_timed_failure(run: Grader, tmp_path: Path) -> None:
    case = {"app.db": sqlite_bytes(tmp_path, "CREATE TABLE t (n INTEGER)")}
    endless = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    )
    result = run(
        "sqlite_query_equals",
        f"{{db_path: app.db, query: '{endless}', expected: 1, timeout: 0.3}}",
        case,
    )
    assert (result.value, result.rationale) == (False, "app.db: the query ran over 0.3s")


@pytest.mark.parametrize(
    ("content", "fact"),
    [
        (b"not a database at all, just text" * 100, "the query failed: file is not a database"),
        (b"", "the query failed: no such table: t"),
    ],
)
def test_a_file_that_is_no_database_fails(run: Grader, content: bytes, fact: str) -> None:
    result = run(
        "sqlite_query_equals",
        "{db_path: app.db, query: 'SELECT n FROM t', expected: 1}",
        {"app.db": content},
    )
    assert (result.value, result.rationale) == (False, f"app.db: {fact}")


def xlsx_bytes(
    sheets: dict[str, str], shared: list[str] | None = None, extra: Files | None = None
) -> bytes:
    """A minimal real workbook: each sheet's <sheetData> XML, the shared strings."""
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        entries = "".join(
            f'<sheet name="{name}" sheetId="{i}" r:id="rId{i}"/>'
            for i, name in enumerate(sheets, 1)
        )
        z.writestr(
            "xl/workbook.xml",
            f'<workbook xmlns="{main}" xmlns:r="{rel}"><sheets>{entries}</sheets></workbook>',
        )
        links = "".join(
            f'<Relationship Id="rId{i}" Target="worksheets/sheet{i}.xml" Type="ws"/>'
            for i in range(1, len(sheets) + 1)
        )
        z.writestr(
            "xl/_rels/workbook.xml.rels",
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
            f'relationships">{links}</Relationships>',
        )
        for i, data in enumerate(sheets.values(), 1):
            z.writestr(
                f"xl/worksheets/sheet{i}.xml",
                f'<worksheet xmlns="{main}"><sheetData>{data}</sheetData></worksheet>',
            )
        if shared is not None:
            items = "".join(f"<si><t>{text}</t></si>" for text in shared)
            z.writestr("xl/sharedStrings.xml", f'<sst xmlns="{main}">{items}</sst>')
        for name, content in (extra or {}).items():
            z.writestr(name, content)
    return buffer.getvalue()


WORKBOOK = xlsx_bytes(
    {
        "Summary": '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1"><v>42</v></c>'
        '<c r="C1"><f>B1/8</f><v>5.25</v></c><c r="D1" t="b"><v>1</v></c>'
        '<c r="E1" t="inlineStr"><is><t>inline</t></is></c></row>',
        "Data": '<row r="2"><c r="B2" t="str"><f>"x"&amp;"y"</f><v>xy</v></c></row>',
    },
    shared=["total"],
)


@pytest.mark.parametrize(
    ("arguments", "value"),
    [
        ("{cell: A1, expected: total}", True),
        ("{cell: B1, expected: 42}", True),
        ("{cell: $B$1, expected: 42.0}", True),
        ("{cell: C1, expected: 5.25}", True),
        ("{cell: D1, expected: true}", True),
        ("{cell: E1, expected: inline}", True),
        ("{cell: B2, expected: xy, sheet: Data}", True),
        ("{cell: B1, expected: 41}", False),
        ("{cell: Z9, expected: 1}", False),
        ("{cell: A1, expected: total, sheet: Nope}", False),
    ],
)
def test_xlsx_cell_equals(run: Grader, arguments: str, value: bool) -> None:
    result = run("xlsx_cell_equals", "{path: book.xlsx, " + arguments[1:], {"book.xlsx": WORKBOOK})
    assert result.value is value, result.rationale


@pytest.mark.parametrize(
    ("content", "fact"),
    [
        (b"PK\x03\x04 truncated", "is not a readable .xlsx workbook"),
        (
            xlsx_bytes(
                {"S": '<row><c r="A1" t="s"><v>0</v></c></row>'},
                extra={
                    "xl/sharedStrings.xml": '<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">'
                    '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><sst>&b;</sst>'
                },
            ),
            "declares a DTD (refused)",
        ),
        (xlsx_bytes({"S": "<row><c"}), "is not valid XML"),
    ],
)
def test_a_broken_or_hostile_workbook_fails(run: Grader, content: bytes, fact: str) -> None:
    result = run("xlsx_cell_equals", "{path: b.xlsx, cell: A1, expected: x}", {"b.xlsx": content})
    assert result.value is False
    assert fact in result.rationale


def test_a_zip_bomb_workbook_is_refused_before_it_is_inflated(run: Grader) -> None:
    bomb = xlsx_bytes({"S": ""}, extra={"xl/sharedStrings.xml": "<sst>" + " " * (200 * 2**20)})
    result = run(
        "xlsx_cell_equals",
        "{path: b.xlsx, cell: A1, expected: x}",
        {"b.xlsx": bomb},
        limits=Limits(memory_mb=256),
    )
    assert result.value is False
    assert "is empty" in result.rationale or "over the cap" in result.rationale


# --- command criteria -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("builtin", "arguments", "value"),
    [
        ("command_output_contains", "{cmd: 'cat out.txt', text: 'er: 4'}", True),
        ("command_output_contains", "{cmd: 'cat out.txt >&2', text: 'er: 4'}", False),
        ("command_output_matches", "{cmd: 'cat out.txt', expected: 'answer: 42'}", True),
        (
            "command_output_matches",
            "{command: 'echo warn >&2; cat out.txt', expected: 'answer: 42'}",
            True,
        ),
        (
            "command_output_matches",
            "{cmd: 'cat out.txt; echo more', expected: 'answer: 42'}",
            False,
        ),
        ("command_output_matches_regex", "{cmd: [cat, out.txt], pattern: '^answer: \\d+$'}", True),
        ("command_output_contains", "{cmd: 'pwd', cwd: sub, text: /sub}", True),
        ("command_output_contains", "{cmd: 'pwd', cwd: nosuchdir, text: /}", False),
        ("command_output_contains", "{cmd: 'sleep 5; echo done', text: done, timeout: 0.3}", False),
        ("command_output_contains", "{cmd: 'yes | head -c 3000000', text: y}", False),
        ("command_succeeds", "{cmd: 'test -f out.txt'}", True),
    ],
)
def test_command_criteria(run: Grader, builtin: str, arguments: str, value: bool) -> None:
    result = run(builtin, arguments, {**FILES, "sub/x": ""})
    assert result.value is value, result.rationale


@pytest.mark.parametrize(
    ("number", "name"),
    [(9, "SIGKILL"), (34, "SIGRTMIN"), (40, "SIGRTMIN+6"), (50, "SIGRTMAX-14"), (64, "SIGRTMAX")],
)
def test_a_command_killed_by_any_signal_fails_naming_it(
    run: Grader, number: int, name: str
) -> None:
    """A real-time signal has no signal.Signals member: naming it must not raise (which
    made the judge error, and the error could raise the reward)."""
    result = run("command_succeeds", f"{{cmd: 'kill -{number} $$'}}", {})
    assert (result.value, result.rationale) == (False, f"killed by {name}")
    stdout = run("command_output_contains", f"{{cmd: 'echo hi; kill -{number} $$', text: hi}}", {})
    assert stdout.value is True and f"(killed by {name})" in stdout.rationale


@pytest.mark.parametrize("number", [0, 32, 65, -1, 10**30])
def test_a_number_that_is_no_signal_is_named_as_a_number(number: int) -> None:
    assert signal_name(number) == f"signal {number}"


def test_a_command_needs_exactly_one_of_cmd_and_command(run: Grader) -> None:
    config = run.config("command_succeeds", "{cmd: 'true', command: 'true'}")
    with pytest.raises(ConfigError, match="exactly one of cmd, command"):
        load_eval(config)


# --- the tamper guards ----------------------------------------------------------------

PROJECT = {
    "src/app.py": "def add(a, b):\n    return a + b\n",
    "tests/test_app.py": "from src.app import add\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    "tests/data/cases.json": "[1, 2]",
    "pytest.ini": "[pytest]\n",
}
TRUSTED = {f"protected/{path}": text for path, text in PROJECT.items() if path != "src/app.py"}
GUARD = "{paths: ['tests/**', pytest.ini, conftest.py], reference: protected}"


def test_an_untouched_test_suite_passes_the_guard(run: Grader) -> None:
    result = run("guard/files_unchanged", GUARD, PROJECT, TRUSTED)
    assert (result.value, result.rationale) == (True, "3 protected files unchanged, none added")


@pytest.mark.parametrize(
    ("tamper", "rationale"),
    [
        ({"tests/test_app.py": "def test_add():\n    assert True\n"}, "changed: tests/test_app.py"),
        ({"tests/conftest.py": "import pytest\n"}, "added: tests/conftest.py"),
        ({"conftest.py": "collect_ignore = ['tests']\n"}, "added: conftest.py"),
        ({"pytest.ini": "[pytest]\naddopts = -p no:python\n"}, "changed: pytest.ini"),
    ],
)
def test_an_edited_or_added_test_file_fails_the_guard(
    run: Grader, tamper: Files, rationale: str
) -> None:
    result = run("guard/files_unchanged", GUARD, {**PROJECT, **tamper}, TRUSTED)
    assert result.value is False
    assert result.rationale == f"protected files were tampered with: {rationale}"


def test_a_deleted_or_symlinked_test_file_fails_the_guard(run: Grader) -> None:
    case = run.case(PROJECT)
    (case / "tests/data/cases.json").unlink()
    (case / "tests/test_app.py").unlink()
    (case / "tests/test_app.py").symlink_to("/dev/null")
    result = run("guard/files_unchanged", GUARD, case, TRUSTED)
    assert result.rationale == (
        "protected files were tampered with: changed: tests/test_app.py; "
        "deleted: tests/data/cases.json"
    )


def test_a_test_dir_replaced_by_a_symlink_fails_the_guard(run: Grader, tmp_path: Path) -> None:
    case = run.case({path: text for path, text in PROJECT.items() if not path.startswith("tests")})
    elsewhere = tmp_path / "fake-tests"
    write_files(
        elsewhere, {"test_app.py": PROJECT["tests/test_app.py"], "data/cases.json": "[1, 2]"}
    )
    (case / "tests").symlink_to(elsewhere)
    result = run("guard/files_unchanged", GUARD, case, TRUSTED)
    assert result.value is False
    assert "deleted: tests/data/cases.json, tests/test_app.py" in result.rationale


def test_the_guard_takes_a_sha256sum_manifest(run: Grader) -> None:
    import hashlib

    manifest = "".join(
        f"{hashlib.sha256(text.encode()).hexdigest()}  ./{path}\n"
        for path, text in PROJECT.items()
        if path.startswith("tests/")
    )
    arguments = "{paths: 'tests/**', reference: tests.sha256}"
    assert run("files_unchanged", arguments, PROJECT, {"tests.sha256": manifest}).value is True
    tampered = {**PROJECT, "tests/data/cases.json": "[]"}
    assert run("files_unchanged", arguments, tampered, {"tests.sha256": manifest}).value is False


def test_a_malformed_manifest_is_a_load_error(run: Grader) -> None:
    config = run.config(
        "files_unchanged",
        "{paths: 'tests/**', reference: bad.sha256}",
        {"bad.sha256": "not a digest  tests/x.py\n"},
    )
    with pytest.raises(ConfigError, match="line 1 is not `<sha256>  <path>`"):
        load_eval(config)


def test_a_guard_that_cannot_see_everything_fails(run: Grader) -> None:
    case = run.case(PROJECT)
    (case / "tests/data").chmod(0)
    try:
        result = run("files_unchanged", GUARD, case, TRUSTED)
    finally:
        (case / "tests/data").chmod(0o755)
    if os.geteuid() == 0:  # root reads it anyway: then it is simply unchanged
        assert result.value is True
    else:
        assert (result.value, result.rationale) == (
            False,
            "the protected files cannot be verified: tests/data: cannot be read "
            "(Permission denied)",
        )


def test_no_new_files_matching(run: Grader) -> None:
    arguments = "{paths: ['conftest.py', '*.pth', sitecustomize.py]}"
    assert run("no_new_files_matching", arguments, PROJECT).value is True
    planted = {**PROJECT, "lib/site-packages/evil.pth": "import os", "deep/a/conftest.py": ""}
    result = run("guard/no_new_files_matching", arguments, planted)
    assert (result.value, result.rationale) == (
        False,
        "files that must not be there: deep/a/conftest.py, lib/site-packages/evil.pth",
    )
    shipped = {"protected/tests/conftest.py": "fixture = 1\n"}
    kept = {**PROJECT, "tests/conftest.py": "fixture = 1\n"}
    arguments = "{paths: '**/conftest.py', reference: protected}"
    assert run("no_new_files_matching", arguments, kept, shipped).value is True


# --- the agent's trail ----------------------------------------------------------------


def events(*tools: str, cost: float | None = 0.25, result: str = "ok") -> str:
    lines = []
    for index, name in enumerate(tools):
        lines.append(
            {
                "type": "assistant",
                "text": f"turn {index}",
                "tools": [
                    {
                        "name": name,
                        "id": f"t{index}",
                        "input": {
                            "path"
                            if name == "Grep"
                            else "file_path": f"/repo/docs/{name.lower()}.md"
                        },
                    }
                ],
            }
        )
        lines.append({"type": "tool_result", "tool_use_id": f"t{index}", "content": result})
    if cost is not None:
        lines.append({"type": "result", "cost_usd": cost})
    return json.dumps(lines)


@pytest.mark.parametrize(
    ("builtin", "arguments", "trail", "value"),
    [
        ("trajectory_tool_used", "{tool_name: Bash}", events("Read", "Bash"), True),
        ("trajectory_tool_used", "{tool_name: Bash, min_count: 2}", events("Bash"), False),
        ("trajectory_tool_not_used", "{tool_name: WebFetch}", events("Read"), True),
        ("trajectory_tool_not_used", "{tool_name: Read}", events("Read"), False),
        ("trajectory_tool_not_used", "{tool_name: Read}", None, False),
        ("trajectory_turn_count", "{max_turns: 2}", events("Read", "Bash"), 1.0),
        ("trajectory_turn_count", "{max_turns: 2}", events("Read", "Bash", "Bash"), 0.5),
        ("trajectory_turn_count", "{max_turns: 1}", events("Read", "Bash", "Bash"), 0.0),
        ("cost_budget", "{}", events("Read", cost=0.25), True),
        ("efficiency/cost_budget", "{max_cost_usd: 0.1}", events("Read", cost=0.25), False),
        ("cost_budget", "{}", events("Read", cost=None), False),
        ("tool_call_validation", "{}", events("Read", "Bash"), True),
        ("process/tool_call_validation", "{}", events("Bash", result="Error: exit 1"), False),
    ],
)
def test_trail_builtins(
    run: Grader, builtin: str, arguments: str, trail: str | None, value: bool | float
) -> None:
    case: Files = {"x.txt": "x", **({"events.json": trail} if trail else {})}
    result = run(builtin, arguments, case, extra=CASE_TRAIL)
    assert result.value == value and type(result.value) is type(value), result.rationale


CASE_TRAIL = "trajectory: case\n"  # the case's own events.json (agent-written) is the trail


def test_a_tool_called_through_a_subagent_or_off_the_agents_steps_is_still_used(
    run: Grader,
) -> None:
    """`*_not_used` must not fail open: a forbidden call made by a subagent (events) or on
    an ATIF step without `source: agent` counts, as rewardkit counts every step."""
    subagent = json.dumps(
        [
            {"type": "assistant", "text": "delegating", "tools": [{"name": "Task", "id": "t0"}]},
            {
                "type": "assistant",
                "parent_tool_use_id": "t0",
                "text": "",
                "tools": [{"name": "WebFetch", "id": "t1", "input": {"url": "u"}}],
            },
        ]
    )
    off_steps = json.dumps(
        {
            "steps": [
                {"step_id": 1, "source": "agent", "message": "hi"},
                {
                    "step_id": 2,
                    "source": "system",
                    "tool_calls": [
                        {"tool_call_id": "c1", "function_name": "WebFetch", "arguments": {}}
                    ],
                },
            ]
        }
    )
    for name, trail in (("events.json", subagent), ("trajectory.json", off_steps)):
        case = {name: trail}
        result = run("trajectory_tool_not_used", "{tool_name: WebFetch}", case, extra=CASE_TRAIL)
        assert (result.value, result.rationale) == (False, "WebFetch was called 1 times")
        used = run("trajectory_tool_used", "{tool_name: WebFetch}", case, extra=CASE_TRAIL)
        assert used.value is True


def test_the_reference_builtins_say_what_the_reference_says(run: Grader) -> None:
    trail = {"events.json": events("Read", cost=0.25)}
    assert run("cost_budget", "{}", trail, extra=CASE_TRAIL).rationale == (
        "Cost $0.25 within budget $1.00"
    )
    assert run("cost_budget", "{}", {"x": ""}).rationale == (
        "No cost data available: no agent logs: Harbor's /logs/agent was not collected for "
        "this case (declare /logs/agent/trajectory.json an artifact)"
    )
    empty = run("tool_call_validation", "{}", {"events.json": "[]"}, extra=CASE_TRAIL)
    assert (empty.value, empty.rationale) == (True, "No tool calls to validate")


@pytest.mark.parametrize(
    ("trail", "fact"),
    [
        # every step's metrics, none with a cost: it read as $0.00, "within budget"
        (
            {"steps": [{"source": "agent", "metrics": {"prompt_tokens": 9}}]},
            "the trajectory gives no final_metrics.total_cost_usd, and 1 of the 1 agent "
            "steps with metrics give no cost_usd that is a finite number >= 0",
        ),
        (
            {
                "steps": [{"source": "agent", "metrics": {"cost_usd": 0.01}}],
                "final_metrics": {"total_cost_usd": int("1" + "0" * 399)},
            },
            "final_metrics.total_cost_usd is 10000000000000000000000000000000... "
            "(400 characters), not a finite number >= 0",
        ),
        (
            {"steps": [], "final_metrics": {"total_cost_usd": float("inf")}},
            "final_metrics.total_cost_usd is Infinity, not a finite number >= 0",
        ),
        (
            {"steps": [], "final_metrics": {"total_cost_usd": {"usd": 0}}},
            'final_metrics.total_cost_usd is {"usd": 0}, not a finite number >= 0',
        ),
        (
            [{"type": "result", "cost_usd": 0.01}, {"type": "result", "cost_usd": "free"}],
            'the last `result` event\'s cost is "free", not a finite number >= 0',
        ),
    ],
)
def test_cost_budget_fails_on_a_cost_the_trail_does_not_give(
    run: Grader, trail: object, fact: str
) -> None:
    name = "events.json" if isinstance(trail, list) else "trajectory.json"
    result = run("cost_budget", "{max_cost_usd: 100}", {name: json.dumps(trail)}, extra=CASE_TRAIL)
    assert (result.value, result.rationale) == (False, f"No cost data available: {fact}")


@pytest.mark.parametrize(
    ("builtin", "arguments"),
    [
        ("trajectory_tool_not_used", "{tool_name: Bash}"),
        ("trajectory_turn_count", "{max_turns: 9}"),
        ("cost_budget", "{}"),
        ("tool_call_validation", "{}"),
        ("consulted_docs", "{}"),
    ],
)
def test_a_forged_trail_in_the_case_is_not_read_without_trajectory_case(
    run: Grader, builtin: str, arguments: str
) -> None:
    """A case that leaves a perfect events.json (no tool calls, $0) outside Harbor, where
    no agent logs exist: every trail builtin fails, saying there is no trajectory."""
    forged = {
        "events.json": json.dumps(
            [{"type": "assistant", "text": "done"}, {"type": "result", "cost_usd": 0.0}]
        )
    }
    extra = "annotations: {expected_files: [docs/a.md]}\n"
    result = run(builtin, arguments, forged, extra=extra)
    assert result.value in (False, 0.0), result.rationale
    expected = "No cost data available" if builtin == "cost_budget" else "no agent logs"
    assert expected in result.rationale


def test_consulted_docs_counts_reads_against_expected_files(run: Grader) -> None:
    trail = {"events.json": events("Read", "Grep", "Edit")}
    annotations = (
        CASE_TRAIL + "annotations: {expected_files: [docs/read.md, docs/grep.md, docs/edit.md]}\n"
    )
    result = run("consulted_docs", "{min_coverage: 0.6}", trail, extra=annotations)
    assert (result.value, result.rationale) == (
        True,
        "Read 2/3 expected docs (coverage 67%, threshold 60%)",
    )
    no_grep = run("consulted_docs", "{include_grep: false}", trail, extra=annotations)
    assert (no_grep.value, no_grep.rationale) == (
        False,
        "Read 1/3 expected docs (coverage 33%, threshold 80%)",
    )
    preloaded = run(
        "consulted_docs",
        "{include_grep: false, preloaded_files: [docs/edit.md], min_coverage: 0.6}",
        trail,
        extra=annotations,
    )
    assert preloaded.rationale == (
        "Read 2/3 expected docs (coverage 67%, threshold 60%) [1 via auto-load]"
    )
    nothing = run("consulted_docs", "{}", trail)
    assert (nothing.value, nothing.rationale) == (
        True,
        "No expected_files specified — nothing to verify",
    )


def test_outputs_tool_entries_choose_the_tool_calls_judges_see(run: Grader) -> None:
    extra = "    if: len(outputs['tool_calls']) == 1\n"
    config = run.config("tool_call_validation", "{}", extra=extra)
    text = config.read_text()
    config.write_text(CASE_TRAIL + "outputs:\n  - tool: Bash\n  - path: x.txt\n" + text)
    result = grade(
        load_eval(config), run.case({"x.txt": "", "events.json": events("Read", "Bash")})
    )
    assert (result.results[0].status, result.results[0].rationale) == (
        Status.OK,
        "All 1 tool calls completed successfully",
    )


# --- a builtin that runs away on the case fails ---------------------------------------


@pytest.mark.slow
def test_a_regex_the_case_makes_backtrack_for_ever_fails_not_errors(run: Grader) -> None:
    result = run(
        "file_contains_regex",
        "{path: a.txt, pattern: '^(a+)+$'}",
        {"a.txt": "a" * 40 + "!"},
        extra="    timeout: 1\n",
    )
    assert (result.value, result.rationale) == (
        False,
        "the judge gave no answer on this case (timed out after 1s (judge timeout)): "
        "counted as a failure",
    )


# --- the docs list every builtin with every argument ----------------------------------


def test_the_reference_table_lists_every_builtin_and_argument() -> None:
    rows = {
        match.group(1): match.group(2)
        for match in re.finditer(
            r"^\| `([a-z_]+/[a-z_]+)` \| ([^|]*) \|", DOCS.read_text(), re.MULTILINE
        )
    }
    for found in all_builtins():
        assert found.qualified_name in rows, f"{found.qualified_name} is not in {DOCS.name}"
        for key in found.arguments:
            assert f"`{key.name}`" in rows[found.qualified_name], (found.qualified_name, key.name)
