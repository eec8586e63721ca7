"""Trusted test lists, CTRF in and out, and the faults of a toolchain told from the case's.

Reports come from real runs where a runner is at hand (pytest with --junitxml,
pytest-json-report and pytest-json-ctrf; go test when Go is installed) and from the
checked-in samples of tests/fixtures/reports. The toolchain faults are judged with
real commands in the sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.paths import REPO, TESTS
from tests.toolchain import PYTEST_PACKAGES, toolchain_python, world_readable_dir
from tests.viewer import ctrf_viewer_accepts
from verifier.errors import ConfigError
from verifier.grading import grade, load_eval
from verifier.judges.builtins import builtin_reference_files
from verifier.judges.builtins.reports import (
    ERRORED,
    FAILED,
    PASSED,
    SKIPPED,
    Counts,
    Outcome,
    Report,
    detect_format,
    parse_report,
)
from verifier.judges.builtins.testlists import (
    MISSING,
    TrustedTests,
    pytest_junit_name,
    report_names,
    select,
)
from verifier.output import CTRF_JSON, prepare_out_dir, write_outputs
from verifier.references import referenced_files
from verifier.results import JudgeResult, Status

WriteConfig = Callable[..., Path]
MakeCase = Callable[..., Path]
SAMPLES = TESTS / "fixtures" / "reports"

SUITE = """\
import pytest


def test_add():
    assert 1 + 1 == 2


def test_broken():
    assert 1 + 1 == 3


@pytest.mark.skip(reason="later")
def test_later():
    pass


class TestMore:
    @pytest.mark.parametrize(("a", "b"), [(1, 2), (2, 2)])
    def test_lt(self, a, b):
        assert a < b


@pytest.fixture
def broken_fixture():
    raise RuntimeError("no database")


def test_needs_db(broken_fixture):
    pass
"""
NODE_IDS = {
    "tests/test_suite.py::test_add": PASSED,
    "tests/test_suite.py::test_broken": FAILED,
    "tests/test_suite.py::test_later": SKIPPED,
    "tests/test_suite.py::TestMore::test_lt[1-2]": PASSED,
    "tests/test_suite.py::TestMore::test_lt[2-2]": FAILED,
    "tests/test_suite.py::test_needs_db": ERRORED,
}


def run_judge(
    write_config: WriteConfig,
    case: Path,
    arguments: dict[str, Any],
    builtin: str = "tests/pass_rate",
    files: dict[str, str] | None = None,
) -> JudgeResult:
    config = write_config(  # the judge's own timeout above any command's
        f"judges:\n  - name: j\n    builtin: {builtin}\n    timeout: 200\n"
        f"    arguments: {json.dumps(arguments)}\n"
    )
    for name, text in (files or {}).items():
        (config.parent / name).write_text(text)
    return grade(load_eval(config), case).results[0]


@pytest.fixture(scope="module")
def suite_reports() -> Iterator[Path]:
    """One real pytest run of SUITE (under tests/, from the repo root), reported three
    ways: JUnit, pytest-json-report and CTRF (pytest-json-ctrf)."""
    root = Path(tempfile.mkdtemp(prefix="verifier-suite-"))
    (root / "tests").mkdir()
    (root / "tests" / "test_suite.py").write_text(SUITE)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--junitxml=out/report.xml",
        "--json-report",
        "--json-report-file=out/report.json",
        "--ctrf",
        "out/ctrf.json",
        "tests/test_suite.py",
    ]
    subprocess.run(command, cwd=root, capture_output=True, timeout=120, check=False)
    yield root
    shutil.rmtree(root, ignore_errors=True)


# --- CTRF in ----------------------------------------------------------------------------------


def test_a_real_pytest_json_ctrf_report_counts_as_pytest_did(suite_reports: Path) -> None:
    data = (suite_reports / "out" / "ctrf.json").read_bytes()
    assert detect_format(data) == "ctrf"
    report = parse_report(data)
    assert report.format == "ctrf"
    assert {outcome.test: outcome.result for outcome in report.outcomes} == NODE_IDS
    assert parse_report(data, "ctrf") == report


@pytest.mark.parametrize(
    ("test", "result"),
    [
        ({"name": "t", "status": "passed"}, PASSED),
        ({"name": "t", "status": "failed"}, FAILED),
        ({"name": "t", "status": "failed", "rawStatus": "error"}, ERRORED),
        ({"name": "t", "status": "failed", "rawStatus": "teardown_failed"}, ERRORED),
        ({"name": "t", "status": "skipped"}, SKIPPED),
        ({"name": "t", "status": "pending"}, SKIPPED),
        ({"name": "t", "status": "other"}, ERRORED),
    ],
)
def test_ctrf_statuses(test: dict[str, str], result: str) -> None:
    document = {"results": {"tool": {"name": "x"}, "tests": [test]}}
    for data in (json.dumps(document), json.dumps(document, indent=2)):  # one line, or many
        assert parse_report(data.encode()).outcomes[0].result == result


@pytest.mark.parametrize(
    ("document", "fact"),
    [
        (
            {"results": {"tests": [{"name": "t", "status": "great"}]}},
            "has test 't' with unknown status 'great'",
        ),
        ({"results": {"tests": [{"status": "passed"}]}}, "has a test without a name"),
        ({"results": {"tests": [{"name": "", "status": "passed"}]}}, "has a test without a name"),
        ({"results": {"summary": {}}}, "is JSON but not a CTRF report (no results.tests list)"),
    ],
)
def test_unusable_ctrf_is_a_fact(document: dict[str, Any], fact: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_report(json.dumps(document).encode())
    assert fact in str(caught.value)


# --- a listed id finds its test in every format ----------------------------------------------


@pytest.mark.parametrize("report", ["report.xml", "report.json", "ctrf.json"])
def test_node_ids_find_their_tests_in_junit_pytest_json_and_ctrf(
    suite_reports: Path, report: str
) -> None:
    parsed = parse_report((suite_reports / "out" / report).read_bytes())
    selection = select(parsed, TrustedTests(tuple(NODE_IDS), ("tests",) * len(NODE_IDS)))
    assert {entry.test: entry.result for entry in selection.listed} == NODE_IDS
    assert selection.unlisted == 0


def test_pytest_junit_names_are_mangled_as_pytest_does() -> None:
    assert pytest_junit_name("tests/test_calc.py::test_add") == "tests.test_calc.test_add"
    assert pytest_junit_name("a/b/test_x.py::TestY::test_z[1-a::b]") == (
        "a.b.test_x.TestY.test_z[1-a::b]"
    )


def test_go_ids_find_their_tests_in_go_json_and_go_junit_report() -> None:
    listed = TrustedTests(
        (
            "example.com/calc/calc/TestAdd",
            "example.com/calc/calc/TestTable/two",
            "example.com/calc/calc/TestGone",
        ),
        ("tests",) * 3,
    )
    for sample in ("go-test.json", "go-test-go1.24.json", "go-junit-report.xml"):
        selection = select(parse_report((SAMPLES / sample).read_bytes()), listed)
        assert [entry.result for entry in selection.listed] == [PASSED, FAILED, MISSING], sample


def test_junit_ids_as_the_rationale_names_them() -> None:
    """Surefire's testcases, by the names the rationale shows (classname.name)."""
    report = parse_report((SAMPLES / "surefire" / "TEST-calc.CalcTest.xml").read_bytes())
    listed = TrustedTests(("calc.CalcTest.adds", "calc.CalcTest.throwsError"), ("tests",) * 2)
    assert [entry.result for entry in select(report, listed).listed] == [PASSED, ERRORED]


def test_tests_answering_to_one_id_take_the_worst_outcome() -> None:
    """JUnit cannot tell tests/test_a.py from tests.test_a.py: a second test of the same
    name can only lower the count, never stand in for a failing one."""
    outcomes = (Outcome("tests.test_a.test_x", FAILED), Outcome("tests.test_a.test_x", PASSED))
    report = Report("junit", Counts.of(outcomes), outcomes)
    selection = select(report, TrustedTests(("tests/test_a.py::test_x",), ("tests",)))
    assert selection.listed[0].result == FAILED
    assert report_names("p/q/TestX/sub") >= {"TestX/sub (p/q)", "p/q.TestX/sub"}


# --- the builtins with a list -------------------------------------------------------------------


@pytest.fixture
def suite_case(make_case: MakeCase, suite_reports: Path) -> Path:
    case = make_case({})
    shutil.copytree(suite_reports / "out", case / "out")
    return case


def test_only_listed_tests_count_and_the_rest_are_counted_as_ignored(
    write_config: WriteConfig, suite_case: Path
) -> None:
    listed = [
        "tests/test_suite.py::test_add",
        "tests/test_suite.py::TestMore::test_lt[1-2]",
        "tests/test_suite.py::test_broken",
    ]
    result = run_judge(write_config, suite_case, {"report": "out/report.xml", "tests": listed})
    assert result.value == pytest.approx(2 / 3)
    assert result.rationale.splitlines() == [
        "2 of 3 listed tests passed, 1 failed, 0 errored, 0 skipped, 0 missing: pass rate "
        "0.6667; 3 tests of the report not listed, ignored; from out/report.xml (junit)",
        "failed: tests/test_suite.py::test_broken",
        "passed: tests/test_suite.py::test_add, tests/test_suite.py::TestMore::test_lt[1-2]",
    ]
    assert result.details["tests"]["unlisted"] == 3


def test_a_missing_or_skipped_listed_test_counts_as_failed(
    write_config: WriteConfig, suite_case: Path
) -> None:
    listed = [
        "tests/test_suite.py::test_add",
        "tests/test_suite.py::test_later",
        "tests/test_suite.py::test_renamed",
    ]
    result = run_judge(write_config, suite_case, {"report": "out/report.json", "tests": listed})
    assert result.value == pytest.approx(1 / 3)
    assert result.rationale.startswith(
        "1 of 3 listed tests passed, 0 failed, 0 errored, 1 skipped, 1 missing (skipped and "
        "missing ones count as failed): pass rate 0.3333"
    )
    assert "\nmissing: tests/test_suite.py::test_renamed\n" in result.rationale
    gate = run_judge(
        write_config, suite_case, {"report": "out/report.json", "tests": listed}, "tests/all_passed"
    )
    assert gate.value is False


def test_fail_to_pass_and_pass_to_pass_count_as_one_list(
    write_config: WriteConfig, suite_case: Path, tmp_path: Path
) -> None:
    """pass_rate is passed / the union; all_passed wants all of both (SWE-bench's
    resolved); the rationale and judges.json count each group."""
    arguments = {
        "report": "out/ctrf.json",
        "fail_to_pass": "f2p.json",
        "pass_to_pass": [
            "tests/test_suite.py::test_add",
            "tests/test_suite.py::TestMore::test_lt[1-2]",
        ],
    }
    f2p = json.dumps(["tests/test_suite.py::test_broken", "tests/test_suite.py::test_needs_db"])
    result = run_judge(write_config, suite_case, arguments, files={"f2p.json": f2p})
    assert result.value == 0.5
    assert "; fail_to_pass 0 of 2 passed; pass_to_pass 2 of 2 passed; " in result.rationale
    assert result.details["tests"]["fail_to_pass"] == {"passed": 0, "listed": 2}
    assert result.details["tests"]["pass_to_pass"] == {"passed": 2, "listed": 2}
    gate = run_judge(
        write_config, suite_case, arguments, "tests/all_passed", files={"f2p.json": f2p}
    )
    assert gate.value is False
    resolved = {
        **arguments,
        "fail_to_pass": ["tests/test_suite.py::TestMore::test_lt[1-2]"],
        "pass_to_pass": ["tests/test_suite.py::test_add"],
    }
    assert run_judge(write_config, suite_case, resolved, "tests/all_passed").value is True
    assert run_judge(write_config, suite_case, resolved).value == 1.0


def test_min_tests_counts_listed_tests_that_ran(
    write_config: WriteConfig, suite_case: Path
) -> None:
    listed = ["tests/test_suite.py::test_add", "tests/test_suite.py::test_gone"]
    arguments = {"report": "out/report.xml", "tests": listed, "min_tests": 2}
    result = run_judge(write_config, suite_case, arguments)
    assert result.value == 0.0
    assert result.rationale.startswith("only 1 listed tests ran, fewer than min_tests 2: ")
    none = run_judge(
        write_config, suite_case, {"report": "out/report.xml", "tests": ["tests/x.py::test_gone"]}
    )
    assert none.rationale.startswith("none of the 1 listed tests ran: ")


def test_a_list_file_beside_eval_yaml_is_a_reference_file(
    write_config: WriteConfig, suite_case: Path
) -> None:
    """One id a line, blank lines and comments skipped; `task init` copies it and a
    batch's resume key hashes it (references.py)."""
    text = "# the trusted tests\ntests/test_suite.py::test_add\n\n  tests/test_suite.py::test_broken  \n"
    result = run_judge(
        write_config,
        suite_case,
        {"report": "out/report.xml", "tests": "t.txt"},
        files={"t.txt": text},
    )
    assert result.value == 0.5
    assert builtin_reference_files("tests/pass_rate", {"tests": "t.txt", "report": "r"}) == [
        "t.txt"
    ]
    assert builtin_reference_files("tests/pass_rate", {"tests": ["a::b"], "report": "r"}) == []


def test_referenced_files_include_the_lists(write_config: WriteConfig) -> None:
    config = write_config(
        textwrap.dedent("""\
        judges:
          - name: j
            builtin: tests/pass_rate
            arguments: {report: r.xml, fail_to_pass: f2p.txt, pass_to_pass: p2p.json}
        """)
    )
    (config.parent / "f2p.txt").write_text("a.py::t\n")
    (config.parent / "p2p.json").write_text('["a.py::u"]')
    found = referenced_files(config, builtin_reference_files)
    assert {str(path) for path in found} >= {"f2p.txt", "p2p.json"}


@pytest.mark.parametrize(
    ("arguments", "files", "message"),
    [
        ("{report: r.xml, tests: []}", {}, "tests: lists no test"),
        ("{report: r.xml, tests: ['']}", {}, "tests[0]: '' is empty"),
        ("{report: r.xml, tests: [' a::b']}", {}, "tests[0]: ' a::b' has spaces around it"),
        ("{report: r.xml, tests: [3]}", {}, "tests[0]: 3 is not a test id (a string)"),
        ("{report: r.xml, tests: ['a::b', 'a::b']}", {}, "tests[1]: 'a::b' is listed twice"),
        ('{report: r.xml, tests: ["a::b\\tc"]}', {}, "holds a control character"),
        (
            "{report: r.xml, tests: missing.txt}",
            {},
            "missing.txt not found (paths are relative to eval.yaml)",
        ),
        (
            "{report: r.xml, tests: t.txt}",
            {"t.txt": "a::b\na::b\n"},
            "tests.t.txt: line 2: 'a::b' is listed twice",
        ),
        (
            "{report: r.xml, tests: t.json}",
            {"t.json": '{"a": 1}'},
            "t.json must hold a JSON list of test ids",
        ),
        ("{report: r.xml, tests: t.json}", {"t.json": "[1"}, "t.json is not valid JSON"),
        ("{report: r.xml, tests: t.txt}", {"t.txt": "# nothing\n"}, "tests: lists no test"),
        (
            "{report: r.xml, fail_to_pass: [a::b], pass_to_pass: [a::b]}",
            {},
            "pass_to_pass: 'a::b' is also in fail_to_pass: list a test once",
        ),
        (
            "{runner: pytest, tests: [tests/test_a.py]}",
            {},
            "tests: 'tests/test_a.py' is not a pytest node id (path::name)",
        ),
        (
            "{runner: go, tests: [TestAdd]}",
            {},
            "tests: 'TestAdd' is not a go test id (Package/TestName)",
        ),
        (
            "{runner: pytest, tests: ['../x/test_a.py::t']}",
            {},
            "tests: '../x/test_a.py::t' names a file outside the repo",
        ),
        (
            "{report: r.xml, paths: [tests]}",
            {},
            "paths: is an argument of `runner:` (pytest or go)",
        ),
        ("{runner: pytest, command: pytest}", {}, "command: does not go with runner: pytest"),
        ("{runner: pytest, format: junit}", {}, "format: does not go with runner: pytest"),
        (
            "{runner: go, ini: pytest.ini}",
            {"pytest.ini": "[pytest]\n"},
            "ini: does not go with runner: go",
        ),
        (
            "{runner: pytest, provide: [k.txt]}",
            {"k.txt": "k"},
            "provide: does not go with runner: pytest",
        ),
        ("{runner: pytest, ini: conf.yaml}", {"conf.yaml": ""}, "must be pytest's configuration"),
        (
            "{runner: pytest, report: r.xml}",
            {},
            "needs exactly one of report, runner (got report, runner)",
        ),
        ("{runner: nose}", {}, "'nose' must be pytest or go"),
        (
            "{runner: pytest, native_modules: [../lib]}",
            {},
            "native_modules: '../lib' must be a path inside the repo, relative to its root",
        ),
        ("{runner: go, native_modules: [lib]}", {}, "native_modules: does not go with runner: go"),
        ("{report: r.xml, native_modules: [lib]}", {}, "native_modules: is an argument of"),
        ("{runner: pytest, args: -x}", {}, "args: must be a list of non-empty strings"),
    ],
)
def test_bad_lists_and_runner_arguments_are_load_errors_naming_file_and_key(
    write_config: WriteConfig, arguments: str, files: dict[str, str], message: str
) -> None:
    config = write_config(f"judges:\n  - {{name: j, builtin: pass_rate, arguments: {arguments}}}\n")
    for name, text in files.items():
        (config.parent / name).write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_eval(config)
    assert caught.value.message.startswith(f"{config}: judges[0] (j).arguments")
    assert message in caught.value.message


# --- the guards the docs recommend catch what they are for ---------------------------------

# docs/builtins.md: the guards of a gate whose tests run by `command:`, not hardened
COMMAND_MODE_PLANTED = [
    "**/conftest.py",
    "**/*.pth",
    "**/sitecustomize.py",
    "**/sitecustomize/**",
    "**/usercustomize.py",
    "**/usercustomize/**",
    "**/*.dist-info/**",
    "**/*.egg-info/**",
    "pytest/**",
    "_pytest/**",
    "pluggy/**",
    "iniconfig/**",
    "py.py",
    "packaging/**",
]
COMMAND_MODE_CONFIG = ["pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"]


@pytest.mark.parametrize(
    "planted",
    [
        "conftest.py",
        "src/pkg/conftest.py",
        "evil.pth",
        "lib/sitecustomize.py",
        "sitecustomize/__init__.py",
        "usercustomize/__init__.py",
        "usercustomize.py",
        "evil-1.0.dist-info/entry_points.txt",
        "vendor/evil.egg-info/entry_points.txt",
        "pytest/__init__.py",
        "_pytest/runner.py",
        "pluggy/__init__.py",
        "py.py",
    ],
)
def test_the_documented_guards_catch_each_planted_file(
    write_config: WriteConfig, make_case: MakeCase, planted: str
) -> None:
    case = make_case({"calc.py": "x = 1\n", planted: "pass\n"})
    result = run_judge(
        write_config, case, {"paths": COMMAND_MODE_PLANTED}, "guard/no_new_files_matching"
    )
    assert result.value is False
    assert result.rationale == f"files that must not be there: {planted}"


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("pytest.ini", "[pytest]\naddopts = -p evil\n"),
        ("tox.ini", "[pytest]\naddopts = -p evil\n"),
        ("setup.cfg", "[tool:pytest]\naddopts = -p evil\n"),
        (
            "pyproject.toml",
            '[project]\nname = "calc"\n[tool.pytest.ini_options]\naddopts = "-p evil"\n',
        ),
    ],
)
def test_the_documented_guards_catch_runner_configuration(
    write_config: WriteConfig, make_case: MakeCase, path: str, text: str
) -> None:
    """The trusted repo has a pyproject.toml (without a pytest table): the agent's table
    is a change of a protected file; the other config files are added ones."""
    case = make_case({"pyproject.toml": '[project]\nname = "calc"\n', path: text})
    config = write_config("judges: []\n")
    (config.parent / "protected").mkdir()
    (config.parent / "protected" / "pyproject.toml").write_text('[project]\nname = "calc"\n')
    result = run_judge(
        write_config,
        case,
        {"paths": COMMAND_MODE_CONFIG, "reference": "protected"},
        "guard/files_unchanged",
    )
    assert result.value is False
    what = "changed" if path == "pyproject.toml" else "added"
    assert result.rationale == f"protected files were tampered with: {what}: {path}"


# --- CTRF out ------------------------------------------------------------------------------------


def test_ctrf_json_holds_each_judges_tests_once_and_renders(
    write_config: WriteConfig, suite_case: Path, tmp_path: Path
) -> None:
    config = write_config(
        textwrap.dedent("""\
        judges:
          - {name: rate, builtin: tests/pass_rate, arguments: {report: out/report.xml}}
          - {name: gate, builtin: tests/all_passed, arguments: {report: out/report.xml}}
          - name: listed
            builtin: tests/pass_rate
            arguments: {report: out/ctrf.json, tests: ['tests/test_suite.py::test_add', 'tests/test_suite.py::test_gone']}
        reward: {judge: rate}
        """)
    )
    out = tmp_path / "out"
    prepare_out_dir(out)
    written = write_outputs(out, grade(load_eval(config), suite_case), durable=False)
    assert out / CTRF_JSON in written
    document = json.loads((out / CTRF_JSON).read_text())
    assert ctrf_viewer_accepts(document)
    results = document["results"]
    assert results["tool"] == {"name": "ctrf+junit"}
    assert {key: results["summary"][key] for key in ("tests", "passed", "failed", "skipped")} == {
        "tests": 8,
        "passed": 3,
        "failed": 4,
        "skipped": 1,
    }
    suites = [test["suite"] for test in results["tests"]]
    assert suites.count(["rate, gate"]) == 6  # the same run once, naming both judges
    assert suites.count(["listed"]) == 2
    missing = next(test for test in results["tests"] if test["name"].endswith("test_gone"))
    assert (missing["status"], missing["rawStatus"]) == ("failed", "missing")
    errored = next(
        test
        for test in results["tests"]
        if test["name"].endswith("needs_db") and test["suite"] == ["rate, gate"]
    )
    assert (errored["status"], errored["rawStatus"]) == ("failed", "error")


def test_no_ctrf_json_without_a_test_report_and_a_stale_one_is_removed(
    write_config: WriteConfig, make_case: MakeCase, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / CTRF_JSON).write_text("{}")
    prepare_out_dir(out)
    assert not (out / CTRF_JSON).exists()
    config = write_config("judges:\n  - {name: j, builtin: file_exists, arguments: {path: a}}\n")
    write_outputs(out, grade(load_eval(config), make_case({"a": "x"})), durable=False)
    assert not (out / CTRF_JSON).exists()


# --- the toolchain's faults are errors, the case's are failures -----------------------------------


@pytest.mark.parametrize(
    ("command", "error"),
    [
        (
            "nonexistent-runner -q",
            "the command exited 127: the toolchain has no nonexistent-runner",
        ),
        ("cd . && nonexistent-runner -q", "the toolchain has no nonexistent-runner"),
        ("FOO=1 exec nonexistent-runner", "the toolchain has no nonexistent-runner"),
        (
            ["nonexistent-runner", "-q"],
            "the toolchain cannot run nonexistent-runner: 'nonexistent-runner' is not in its PATH",
        ),
        (
            ["/nonexistent/bin/pytest"],
            "the toolchain cannot run /nonexistent/bin/pytest: it does not exist",
        ),
    ],
)
@pytest.mark.parametrize(
    "builtin", ["command_succeeds", "command_output_matches", "tests/pass_rate"]
)
def test_a_runner_the_toolchain_lacks_is_an_error(
    write_config: WriteConfig, make_case: MakeCase, command: Any, error: str, builtin: str
) -> None:
    arguments: dict[str, Any] = {"command": command}
    arguments.update({"expected": "x"} if builtin == "command_output_matches" else {})
    arguments.update({"report": "r.xml"} if builtin == "tests/pass_rate" else {})
    result = run_judge(write_config, make_case({"a.txt": "a"}), arguments, builtin)
    assert result.status is Status.ERROR
    assert error in (result.error or "")
    assert result.details["toolchain_fault"] == result.error


@pytest.mark.parametrize(
    "command",
    [
        "sh run_tests.sh",  # the agent's script exits 127
        "./run_tests.sh",  # and again, run by path
        ["./not_executable.sh"],  # a file of the case that cannot be executed
        "sh missing_script.sh",  # the case has no such script: sh exits 127
    ],
)
def test_an_exit_127_the_case_causes_is_a_failure(
    write_config: WriteConfig, make_case: MakeCase, command: Any
) -> None:
    case = make_case(
        {
            "run_tests.sh": "#!/bin/sh\necho 'pytest: not found' >&2\nexit 127\n",
            "not_executable.sh": "#!/bin/sh\nexit 0\n",
        }
    )
    (case / "run_tests.sh").chmod(0o755)
    result = run_judge(write_config, case, {"command": command}, "command_succeeds")
    assert (result.status, result.value) == (Status.OK, False), result.error


def test_a_toolchain_program_the_sandbox_user_cannot_execute_is_an_error(
    write_config: WriteConfig, make_case: MakeCase, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the command runs as the grader's own user: it can run what it can find")
    tools = Path(tempfile.mkdtemp(prefix="verifier-tools-"))  # 0700, root's
    try:
        (tools / "runner").write_text("#!/bin/sh\nexit 0\n")
        (tools / "runner").chmod(0o755)
        result = run_judge(
            write_config, make_case({}), {"command": [str(tools / "runner")]}, "command_succeeds"
        )
        assert result.status is Status.ERROR
        assert (result.error or "").startswith(f"the toolchain cannot start {tools / 'runner'}: ")
        shell = run_judge(
            write_config,
            make_case({}, name="again"),
            {"command": f"{tools / 'runner'} -q"},
            "command_succeeds",
        )
        assert shell.status is Status.ERROR
    finally:
        shutil.rmtree(tools)


def test_the_rationale_keeps_the_start_and_the_decisive_end_of_the_output(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    script = (
        "echo 'ERROR: the first thing that went wrong'\n"
        'i=0; while [ $i -lt 10000 ]; do echo "noise line $i of a long log"; i=$((i+1)); done\n'
        "echo 'OSError: [Errno 30] Read-only file system: report.xml'\nexit 1\n"
    )
    case = make_case({"run.sh": script})
    result = run_judge(write_config, case, {"command": "sh run.sh"}, "command_succeeds")
    lines = result.rationale.splitlines()
    assert lines[:2] == ["exit code 1", "ERROR: the first thing that went wrong"]
    assert lines[-1] == "OSError: [Errno 30] Read-only file system: report.xml"
    assert "characters ...]" in result.rationale  # the middle, cut
    assert len(result.rationale) < 2200
    report = run_judge(write_config, case, {"command": "sh run.sh", "report": "report.xml"})
    assert report.rationale.startswith(
        "report report.xml does not exist\nthe command: exit code 1\n"
        "ERROR: the first thing that went wrong\n"
    )
    assert report.rationale.endswith("OSError: [Errno 30] Read-only file system: report.xml")


# --- runner: go --------------------------------------------------------------------------------

GO_CODE = "package calc\n\nfunc Add(a, b int) int { return a + b }\nfunc Sub(a, b int) int { return a + b }\n"
GO_TESTS = """\
package calc

import "testing"

func TestAdd(t *testing.T) {
	if Add(2, 3) != 5 {
		t.Fatal("add")
	}
}

func TestSub(t *testing.T) {
	if Sub(5, 3) != 2 {
		t.Fatal("sub")
	}
}

func TestTable(t *testing.T) {
	t.Run("add", func(t *testing.T) {
		if Add(1, 1) != 2 {
			t.Fatal("add")
		}
	})
}
"""
GO_LISTED = [
    "example.com/calc/TestAdd",
    "example.com/calc/TestSub",
    "example.com/calc/TestTable/add",
]
GO_MAIN_TEST = """\
package calc

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(0) }
"""


def go_case(make_case: MakeCase, name: str, extra: dict[str, str] | None = None) -> Path:
    return make_case(
        {
            "go.mod": "module example.com/calc\n\ngo 1.19\n",
            "calc.go": GO_CODE,
            "calc_test.go": GO_TESTS,
            **(extra or {}),
        },
        name=name,
    )


@pytest.fixture
def go_tool() -> str:
    found = shutil.which("go")
    if found is None:
        pytest.skip("Go is not installed (scripts/prerequisites.sh go installs Debian's golang-go)")
    return found


def test_go_runner_counts_the_listed_tests(
    write_config: WriteConfig, make_case: MakeCase, go_tool: str
) -> None:
    arguments = {"runner": "go", "tests": GO_LISTED, "timeout": 120}
    result = run_judge(write_config, go_case(make_case, "go"), arguments)
    assert result.status is Status.OK, result.error
    assert result.value == pytest.approx(2 / 3), result.rationale
    assert result.details["runner"] == "go"
    assert "failed: example.com/calc/TestSub" in result.rationale


@pytest.mark.slow
def test_go_runner_pins_the_toolchain_and_a_planted_test_main_only_lowers(
    write_config: WriteConfig, make_case: MakeCase, go_tool: str
) -> None:
    """A go.work redirecting the module and a go.mod asking for another toolchain change
    nothing (GOWORK=off, GOTOOLCHAIN=local); a TestMain that exits 0 runs no test, so
    every listed one is missing: 0."""
    arguments = {"runner": "go", "tests": GO_LISTED, "timeout": 120}
    planted = go_case(make_case, "go-work", {"go.work": "go 1.19\n\nuse ./elsewhere\n"})
    assert run_judge(write_config, planted, arguments).value == pytest.approx(2 / 3)
    main = run_judge(
        write_config, go_case(make_case, "go-main", {"main_test.go": GO_MAIN_TEST}), arguments
    )
    assert main.value == 0.0
    assert main.rationale.startswith("none of the 3 listed tests ran")


GO_KILLER_TEST = """\
package calc

import (
	"os"
	"syscall"
)

func init() {
	os.Stdout.WriteString("--- PASS: TestSub (0.00s)\\n")
	syscall.Kill(os.Getppid(), syscall.SIGKILL)
}
"""


def test_a_test_binary_that_kills_go_counts_no_events(
    write_config: WriteConfig, make_case: MakeCase, go_tool: str
) -> None:
    """go's events come from its own stdout, which the test binary does not hold; a
    binary that kills go to leave a doctored stream behind leaves no report."""
    arguments = {"runner": "go", "tests": GO_LISTED, "timeout": 120}
    case = go_case(make_case, "go-killer", {"zz_test.go": GO_KILLER_TEST})
    result = run_judge(write_config, case, arguments)
    assert (result.status, result.value) == (Status.OK, 0.0), result.error
    assert result.rationale.startswith("the verifier's go run was killed by SIGKILL")


# A task whose tests use a dependency from the module cache (as testify's assert would),
# and the vendor/ dir an agent adds to replace it with one that never fails.
CHECK_MODULE = "example.com/check"
CHECK_CODE = """\
package check

import "testing"

func Equal(t *testing.T, got, want int) {
	t.Helper()
	if got != want {
		t.Fatalf("got %d, want %d", got, want)
	}
}
"""
CHECK_TESTS = """\
package calc

import (
	"testing"

	"example.com/check"
)

func TestAdd(t *testing.T) { check.Equal(t, Add(2, 3), 5) }

func TestSub(t *testing.T) { check.Equal(t, Sub(5, 3), 2) }

func TestTable(t *testing.T) {
	t.Run("add", func(t *testing.T) { check.Equal(t, Add(1, 1), 2) })
}
"""
CHECK_GO_MOD = f"module example.com/calc\n\ngo 1.19\n\nrequire {CHECK_MODULE} v1.0.0\n"
PLANTED_VENDOR = {
    "vendor/modules.txt": f"# {CHECK_MODULE} v1.0.0\n## explicit; go 1.19\n{CHECK_MODULE}\n",
    f"vendor/{CHECK_MODULE}/check.go": CHECK_CODE.replace(
        '\tt.Helper()\n\tif got != want {\n\t\tt.Fatalf("got %d, want %d", got, want)\n\t}\n', ""
    ),
}
# docs/builtins.md: the guards of a gate with runner: go
GO_GUARDED = ["**/*_test.go", "go.mod", "go.sum", "vendor/**"]


@pytest.fixture(scope="module")
def check_module_cache() -> Iterator[tuple[Path, str]]:
    """A module cache every user can read holding example.com/check v1.0.0, filled
    offline from a file proxy, and the go.sum lines of it."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go is not installed (scripts/prerequisites.sh go installs Debian's golang-go)")
    with world_readable_dir("verifier-gomod-") as root:
        versions = root / "proxy" / CHECK_MODULE / "@v"
        versions.mkdir(parents=True)
        module_file = f"module {CHECK_MODULE}\n\ngo 1.19\n"
        (versions / "list").write_text("v1.0.0\n")
        (versions / "v1.0.0.info").write_text('{"Version": "v1.0.0"}')
        (versions / "v1.0.0.mod").write_text(module_file)
        with zipfile.ZipFile(versions / "v1.0.0.zip", "w") as archive:
            archive.writestr(f"{CHECK_MODULE}@v1.0.0/go.mod", module_file)
            archive.writestr(f"{CHECK_MODULE}@v1.0.0/check.go", CHECK_CODE)
        work = root / "work"
        work.mkdir()
        (work / "go.mod").write_text("module example.com/fetch\n\ngo 1.19\n")
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(root),
            "GOFLAGS": "-mod=mod",
            "GOPROXY": f"file://{root / 'proxy'}",
            "GOSUMDB": "off",
            "GOMODCACHE": str(root / "modcache"),
            "GOCACHE": str(root / "gocache"),
        }
        fetched = subprocess.run(
            [go, "mod", "download", "-json", f"{CHECK_MODULE}@v1.0.0"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        sums = json.loads(fetched.stdout)
        go_sum = (
            f"{CHECK_MODULE} v1.0.0 {sums['Sum']}\n"
            f"{CHECK_MODULE} v1.0.0/go.mod {sums['GoModSum']}\n"
        )
        subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
        yield root / "modcache", go_sum


@pytest.mark.slow
def test_a_vendor_dir_planted_beside_a_module_cache_is_caught_by_the_documented_go_guards(
    write_config: WriteConfig, make_case: MakeCase, check_module_cache: tuple[Path, str]
) -> None:
    """go builds against vendor/ whenever vendor/modules.txt is there: a planted copy of
    the tests' own assertion helper passes every test. Only the guard on vendor/** sees it."""
    cache, go_sum = check_module_cache
    env = {"GOMODCACHE": str(cache), "GOPROXY": "off", "GOSUMDB": "off"}
    arguments = {"runner": "go", "tests": GO_LISTED, "timeout": 120, "env": env}
    trusted = {"go.mod": CHECK_GO_MOD, "go.sum": go_sum, "calc_test.go": CHECK_TESTS}
    honest = make_case({**trusted, "calc.go": GO_CODE}, name="go-dependency")
    assert run_judge(write_config, honest, arguments).value == pytest.approx(2 / 3)
    planted = make_case({**trusted, "calc.go": GO_CODE, **PLANTED_VENDOR}, name="go-vendored")
    assert run_judge(write_config, planted, arguments).value == 1.0  # the attack is real
    files = {f"protected/{name}": text for name, text in trusted.items()}
    (write_config("judges: []\n").parent / "protected").mkdir()
    guard = run_judge(
        write_config,
        planted,
        {"paths": GO_GUARDED, "reference": "protected"},
        "guard/files_unchanged",
        files,
    )
    assert guard.value is False
    assert guard.rationale == (
        "protected files were tampered with: added: "
        f"vendor/{CHECK_MODULE}/check.go, vendor/modules.txt"
    )


def test_the_go_guards_tested_are_the_documented_ones() -> None:
    docs = " ".join((REPO / "docs" / "builtins.md").read_text().split())
    listed = docs.split("For go, `guard/files_unchanged` on `[", 1)[1].split("]`", 1)[0]
    assert [item.strip().strip("'") for item in listed.split(",")] == GO_GUARDED


def test_go_runner_without_go_is_an_error(write_config: WriteConfig, make_case: MakeCase) -> None:
    arguments = {"runner": "go", "executable": "/nonexistent/go", "tests": GO_LISTED}
    result = run_judge(write_config, go_case(make_case, "no-go"), arguments)
    assert result.status is Status.ERROR
    assert result.error == "the toolchain cannot run /nonexistent/go: it does not exist"


@pytest.fixture(scope="module")
def pytest_python() -> Iterator[Path]:
    with toolchain_python(PYTEST_PACKAGES) as python:
        yield python


def test_pytest_arguments_the_toolchain_refuses_are_an_error(
    write_config: WriteConfig, make_case: MakeCase, pytest_python: Path
) -> None:
    """`--timeout` without pytest-timeout: pytest refuses to run at all (a usage error),
    which the probe finds without the case."""
    arguments = {
        "runner": "pytest",
        "executable": str(pytest_python),
        "args": ["--timeout=5"],
        "tests": ["tests/test_a.py::test_a"],
    }
    case = make_case({"tests/test_a.py": "def test_a():\n    pass\n"})
    result = run_judge(write_config, case, arguments)
    assert result.status is Status.ERROR
    assert "pytest refused to run with these arguments" in (result.error or "")
    assert "unrecognized arguments: --timeout=5" in (result.error or "")
