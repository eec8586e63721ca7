"""tests/pass_rate and tests/all_passed: partial credit from the reports test runners write.

Reports come from real runs: pytest here (and Maven when its plugins are cached), and
the checked-in samples of tests/fixtures/reports (see its README) for jest-junit,
surefire and go test. Whatever the case holds instead of a usable report makes both
builtins fail with the fact, never error.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.paths import REPO, TESTS
from verifier.errors import ConfigError
from verifier.grading import grade, load_eval
from verifier.judges.builtins.reports import (
    ERRORED,
    FAILED,
    Counts,
    Outcome,
    ReportError,
    detect_format,
    parse_report,
)
from verifier.results import JudgeResult, Status

WriteConfig = Callable[..., Path]
MakeCase = Callable[..., Path]
SAMPLES = TESTS / "fixtures" / "reports"

PYTEST_SUITE = """\
import pytest

def test_one():
    assert True

def test_two():
    assert True

def test_three():
    assert True

def test_broken():
    assert 1 + 1 == 3

@pytest.mark.skip(reason="later")
def test_skipped():
    pass

@pytest.mark.xfail(reason="a known bug")
def test_known_bug():
    assert False

@pytest.mark.xfail(reason="fixed since")
def test_fixed_since():
    assert True
"""
# What pytest makes of PYTEST_SUITE: xfailed is skipped, xpassed passed.
PYTEST_HEAD = "4 of 5 tests passed, 1 failed, 0 errored (2 skipped): pass rate 0.8; from "


def junit(*cases: str) -> str:
    """A JUnit report of testcases, each 'name' (passed) or 'name:failure|error|skipped'."""
    body = ""
    for case in cases:
        name, _, child = case.partition(":")
        inner = f"<{child} message='x'/>" if child else ""
        body += f"<testcase classname='suite' name='{name}'>{inner}</testcase>"
    return (
        f"<?xml version='1.0'?><testsuites><testsuite name='suite'>{body}</testsuite></testsuites>"
    )


def run_judge(
    write_config: WriteConfig,
    case: Path,
    arguments: dict[str, Any],
    builtin: str = "tests/pass_rate",
    timeout: float = 60,
) -> JudgeResult:
    scale = "score_range: [0, 1]" if builtin.endswith("pass_rate") else "feedback_type: bool"
    config = write_config(
        textwrap.dedent(f"""
        judges:
          - name: j
            builtin: {builtin}
            {scale}
            timeout: {timeout}
            arguments: {json.dumps(arguments)}
        """)
    )
    result = grade(load_eval(config), case).results[0]
    assert result.status is Status.OK, result.error
    return result


# --- the formats, from real runs --------------------------------------------------------


@pytest.mark.parametrize(
    ("sample", "format", "counts"),
    [
        ("surefire/TEST-calc.CalcTest.xml", "junit", Counts(1, 1, 1, 1)),
        ("surefire/TEST-calc.MoreTest.xml", "junit", Counts(1, 0, 0, 0)),
        # test.todo has no outcome in jest-junit's XML: it counts as passed; the suite that
        # failed to run is written as two testcases, an <error> and a <failure>
        ("jest-junit.xml", "junit", Counts(3, 2, 1, 1)),
        ("go-junit-report.xml", "junit", Counts(2, 3, 1, 1)),
        ("go-test.json", "go-json", Counts(2, 3, 1, 1)),
        ("go-test-go1.24.json", "go-json", Counts(2, 3, 1, 1)),
        ("go-test-timeout.json", "go-json", Counts(1, 0, 1, 0)),
        ("pytest-json-report.json", "pytest-json", Counts(3, 2, 3, 2)),
        # totals only: the module that failed to import is not in them
        ("pytest-json-report-summary.json", "pytest-json", Counts(3, 2, 2, 2)),
    ],
)
def test_real_samples_count_what_their_runner_counted(
    sample: str, format: str, counts: Counts
) -> None:
    data = (SAMPLES / sample).read_bytes()
    assert detect_format(data) == format
    report = parse_report(data)
    assert (report.format, report.counts) == (format, counts)
    assert parse_report(data, format) == report


def test_go_test_json_counts_subtests_unfinished_tests_and_build_failures() -> None:
    outcomes = parse_report((SAMPLES / "go-test.json").read_bytes()).outcomes
    assert outcomes == (
        Outcome("TestAdd (example.com/calc/calc)", "passed"),
        Outcome("TestSub (example.com/calc/calc)", "failed"),
        Outcome("TestSkipped (example.com/calc/calc)", "skipped"),
        Outcome("TestTable (example.com/calc/calc)", "failed"),
        Outcome("TestTable/one (example.com/calc/calc)", "passed"),
        Outcome("TestTable/two (example.com/calc/calc)", "failed"),
        Outcome("example.com/calc/broken [build failed]", "errored"),
    )
    # the same run as go-junit-report writes it counts the same
    assert [outcome.result for outcome in outcomes] == [
        outcome.result
        for outcome in parse_report((SAMPLES / "go-junit-report.xml").read_bytes()).outcomes
    ]
    timeout = parse_report((SAMPLES / "go-test-timeout.json").read_bytes()).outcomes
    assert Outcome("TestHangs (example.com/calc/slow)", ERRORED) in timeout


@pytest.mark.parametrize(
    ("stream", "counts", "errored"),
    [
        # TestMain exited 1 without a failing test: the package is one errored test
        (
            '{"Action":"run","Package":"p","Test":"TestA"}\n'
            '{"Action":"pass","Package":"p","Test":"TestA"}\n'
            '{"Action":"fail","Package":"p"}\n',
            Counts(1, 0, 1, 0),
            "p (package failed)",
        ),
        # cut at a line: the package never ends, its running test never does either
        (
            '{"Action":"run","Package":"p","Test":"TestA"}\n'
            '{"Action":"pass","Package":"p","Test":"TestA"}\n',
            Counts(1, 0, 1, 0),
            "p (no result: the report ends before the package does)",
        ),
        # go's own messages, redirected into the file with 2>&1, are skipped
        (
            "# p [p.test]\n./p.go:3:1: syntax error\nFAIL\tp [build failed]\nFAIL\n",
            Counts(0, 0, 1, 0),
            "p [build failed]",
        ),
    ],
)
def test_go_package_failures_without_a_failing_test_count_as_errored(
    stream: str, counts: Counts, errored: str
) -> None:
    report = parse_report(stream.encode())
    assert report.counts == counts
    assert Outcome(errored, ERRORED) in report.outcomes


# --- unusable bytes are facts -----------------------------------------------------------

BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(
        f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10 if i > 1 else "&lol;" * 10}">'
        for i in range(1, 10)
    )
    + "]><testsuites><testsuite><testcase name='&lol9;'/></testsuite></testsuites>"
)
TRUNCATED = junit("a", "b").removesuffix("</testsuite></testsuites>")  # a run cut short
EXTERNAL_ENTITY = (
    '<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    "<testsuite><testcase name='&x;'/></testsuite>"
)


@pytest.mark.parametrize(
    ("data", "format", "fact"),
    [
        (b"", None, "is empty"),
        (b" \n\t\n", None, "is empty"),
        (b"\xef\xbb\xbf", None, "is empty"),
        (b"all tests passed!", None, "is not a test report"),
        (BILLION_LAUGHS.encode(), None, "declares a DOCTYPE; refused"),
        (EXTERNAL_ENTITY.encode(), None, "declares a DOCTYPE; refused"),
        (TRUNCATED.encode(), None, "is not well-formed XML (no element found: line 1, column 153)"),
        (b"<testsuites><testcase name='a'>", None, "is not well-formed XML"),
        (
            b"<html><body>100% passed</body></html>",
            None,
            "is XML but not a JUnit report (its root is <html>)",
        ),
        (b"<testsuite><testcase name='&undefined;'/></testsuite>", None, "undefined entity"),
        (b'{"tests": [{"nodeid": "t", "outcome": "passed"}', None, "is not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "pytest-json", "is JSON nested too deeply to read"),
        (b'{"passed": 10}', None, "is JSON but not a pytest-json-report"),
        (b"[1, 2]", "pytest-json", "is JSON but not an object"),
        (
            b'{"tests": [{"nodeid": "t", "outcome": "great"}]}',
            None,
            "has test 't' with unknown outcome 'great'",
        ),
        (
            b'{"tests": [{"nodeid": "t", "outcome": []}]}',
            None,
            "has test 't' with unknown outcome '[]'",
        ),
        (
            b'{"tests": [{"nodeid": "t", "outcome": {"a": 1}}]}',
            None,
            "with unknown outcome \"{'a': 1}\"",
        ),
        (b'{"tests": [{"outcome": "passed"}]}', None, "has a test without a nodeid"),
        (b'{"summary": {"passed": -3}}', None, "has summary.passed '-3', not a count"),
        (b'{"summary": {"passed": true}}', None, "has summary.passed 'True', not a count"),
        (
            b'{"Action":"run","Package":"p","Test":"TestA"}\n{"Action":"pa',
            None,
            "line 2 is not a JSON event (cut short?)",
        ),
        (
            b'{"Action":"run","Package":"p","Test":"TestA"}\n{"Time":"x"}\n',
            None,
            "line 2 is not a go test -json event",
        ),
        (b"ok  \tp\t0.1s\n", "go-json", "has no go test -json events"),
        (b'{"tests": []}', "junit", "is not well-formed XML"),
        (junit("a").encode(), "go-json", "has no go test -json events"),
    ],
)
def test_unusable_reports_are_report_errors_naming_the_fact(
    data: bytes, format: str | None, fact: str
) -> None:
    with pytest.raises(ReportError) as caught:
        parse_report(data, format)
    assert fact in str(caught.value)


def test_a_testcase_with_several_outcomes_counts_once_by_the_worst() -> None:
    data = b"<testsuite><testcase name='t'><skipped/><error/><failure/></testcase></testsuite>"
    assert parse_report(data).outcomes == (Outcome("t", FAILED),)
    nested = b"<testsuite><testcase name='t'><testcase name='u'/><error/></testcase></testsuite>"
    assert parse_report(nested).outcomes == (Outcome("t", ERRORED),)


# --- the builtins on real runs ----------------------------------------------------------


def pytest_case(make_case: MakeCase) -> Path:
    return make_case({"test_calc.py": PYTEST_SUITE})


def run_pytest(case: Path, *options: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, "test_calc.py"],
        cwd=case,
        capture_output=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("options", "report", "first_failed"),
    [
        (("--junitxml=report.xml",), "report.xml", "failed: test_calc.test_broken\n"),
        (
            ("--json-report", "--json-report-file=report.json"),
            "report.json",
            "failed: test_calc.py::test_broken\n",
        ),
    ],
)
def test_pass_rate_of_a_real_pytest_run(
    write_config: WriteConfig,
    make_case: MakeCase,
    options: tuple[str, ...],
    report: str,
    first_failed: str,
) -> None:
    if "--json-report" in options:
        pytest.importorskip("pytest_jsonreport", reason="pytest-json-report is not installed")
    case = pytest_case(make_case)
    run_pytest(case, *options)
    result = run_judge(write_config, case, {"report": report})
    assert result.value == 0.8
    assert result.rationale.startswith(f"{PYTEST_HEAD}{report} (")
    assert first_failed in result.rationale  # failed first, then skipped, then passed
    assert result.rationale.index("skipped: ") < result.rationale.index("passed: ")
    gate = run_judge(write_config, case, {"report": report}, builtin="tests/all_passed")
    assert gate.value is False


def test_pass_rate_sums_the_surefire_reports_a_glob_matches(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    case = make_case({})
    shutil.copytree(SAMPLES / "surefire", case / "target" / "surefire-reports")
    result = run_judge(write_config, case, {"report": "target/surefire-reports/TEST-*.xml"})
    assert result.value == 0.5  # 2 passed, 1 failed, 1 errored, 1 skipped
    assert result.rationale.splitlines()[:3] == [
        "2 of 4 tests passed, 1 failed, 1 errored (1 skipped): pass rate 0.5; from "
        "target/surefire-reports/TEST-calc.CalcTest.xml, "
        "target/surefire-reports/TEST-calc.MoreTest.xml (junit)",
        "failed: calc.CalcTest.subtracts",
        "errored: calc.CalcTest.throwsError",
    ]
    assert result.details["tests"] == {
        "reports": [
            "target/surefire-reports/TEST-calc.CalcTest.xml",
            "target/surefire-reports/TEST-calc.MoreTest.xml",
        ],
        "format": "junit",
        "passed": 2,
        "failed": 1,
        "errored": 1,
        "skipped": 1,
        "failing": ["calc.CalcTest.subtracts", "calc.CalcTest.throwsError"],
    }


MAVEN_POM = """\
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>calc</groupId><artifactId>calc</artifactId><version>1.0</version>
  <properties><maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding></properties>
  <dependencies><dependency><groupId>org.junit.jupiter</groupId>
    <artifactId>junit-jupiter</artifactId><version>5.10.2</version><scope>test</scope>
  </dependency></dependencies>
  <build><plugins>
    <plugin><artifactId>maven-compiler-plugin</artifactId><version>3.13.0</version></plugin>
    <plugin><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
    <plugin><artifactId>maven-surefire-plugin</artifactId><version>3.2.5</version>
      <configuration><testFailureIgnore>true</testFailureIgnore></configuration></plugin>
  </plugins></build>
</project>
"""
MAVEN_TEST = """\
package calc;
import static org.junit.jupiter.api.Assertions.assertEquals;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
class CalcTest {
  @Test void adds() { assertEquals(3, 1 + 2); }
  @Test void subtracts() { assertEquals(1, 3 + 2); }
  @Test void throwsError() { throw new IllegalStateException("boom"); }
  @Disabled("not yet") @Test void skipped() { }
}
"""


@pytest.mark.slow
def test_pass_rate_of_a_real_maven_surefire_run(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    if shutil.which("mvn") is None:
        pytest.skip("Maven is not installed")
    case = make_case({"pom.xml": MAVEN_POM, "src/test/java/calc/CalcTest.java": MAVEN_TEST})
    built = subprocess.run(
        ["mvn", "-o", "-q", "test"],
        cwd=case,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if not (case / "target" / "surefire-reports").is_dir():
        pytest.skip(f"offline Maven could not run surefire here: {built.stdout[-300:]}")
    result = run_judge(write_config, case, {"report": "target/surefire-reports/*.xml"})
    assert result.value == pytest.approx(1 / 3)
    assert result.rationale.startswith("1 of 3 tests passed, 1 failed, 1 errored (1 skipped)")


@pytest.mark.parametrize(
    ("sample", "value", "head"),
    [
        ("jest-junit.xml", 0.5, "3 of 6 tests passed, 2 failed, 1 errored (1 skipped)"),
        ("go-junit-report.xml", 2 / 6, "2 of 6 tests passed, 3 failed, 1 errored (1 skipped)"),
        ("go-test.json", 2 / 6, "2 of 6 tests passed, 3 failed, 1 errored (1 skipped)"),
        ("go-test-go1.24.json", 2 / 6, "2 of 6 tests passed, 3 failed, 1 errored (1 skipped)"),
        ("pytest-json-report.json", 3 / 8, "3 of 8 tests passed, 2 failed, 3 errored (2 skipped)"),
    ],
)
def test_pass_rate_of_checked_in_samples(
    write_config: WriteConfig, make_case: MakeCase, sample: str, value: float, head: str
) -> None:
    case = make_case({"out/" + sample: (SAMPLES / sample).read_bytes()})
    result = run_judge(write_config, case, {"report": "out/" + sample})
    assert result.value == pytest.approx(value)
    assert result.rationale.startswith(head)


def test_all_passed_is_true_only_when_enough_tests_ran_and_none_failed(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    case = make_case({"ok.xml": junit("a", "b", "c:skipped"), "bad.xml": junit("a", "b:error")})
    assert run_judge(write_config, case, {"report": "ok.xml"}, "tests/all_passed").value is True
    assert run_judge(write_config, case, {"report": "bad.xml"}, "tests/all_passed").value is False
    fewer = run_judge(write_config, case, {"report": "ok.xml", "min_tests": 3}, "tests/all_passed")
    assert fewer.value is False
    assert fewer.rationale.startswith("only 2 tests ran, fewer than min_tests 3: 2 of 2 tests")
    rate = run_judge(write_config, case, {"report": "ok.xml", "min_tests": 3})
    assert (rate.value, rate.rationale) == (0.0, fewer.rationale)


def test_the_rationale_names_failing_tests_first_and_is_bounded(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    names = [f"test_{index:03}_{'x' * 300}" for index in range(300)]
    cases = [f"{name}:failure" for name in names[:150]] + names[150:]
    case = make_case({"report.xml": junit(*cases)})
    result = run_judge(write_config, case, {"report": "report.xml"})
    assert result.value == 0.5
    lines = result.rationale.splitlines()
    assert lines[0].startswith("150 of 300 tests passed, 150 failed")
    assert lines[1].startswith("failed: suite.test_000_xxx")
    shown = lines[1].count("suite.test_")  # names cut to 200 characters, as many as fit
    assert (shown, lines[1][-13:]) == (9, " and 141 more")
    assert lines[2:] == ["passed: 150 not named"]
    assert len(result.rationale) <= 2000
    assert len(result.details["tests"]["failing"]) == 100
    assert all(len(name) == 200 for name in result.details["tests"]["failing"])


def test_the_rationale_names_at_most_twenty_tests(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    cases = [f"t{index}:error" for index in range(15)] + [f"p{index}" for index in range(15)]
    case = make_case({"report.xml": junit(*cases)})
    result = run_judge(write_config, case, {"report": "report.xml"})
    assert result.rationale.splitlines()[1:] == [
        "errored: " + ", ".join(f"suite.t{index}" for index in range(15)),
        "passed: " + ", ".join(f"suite.p{index}" for index in range(5)) + " and 10 more",
    ]


# --- what the agent leaves makes both fail, never error ---------------------------------


def hostile_case(make_case: MakeCase) -> Path:
    case = make_case(
        {
            "empty.xml": "",
            "truncated.xml": TRUNCATED,
            "laughs.xml": BILLION_LAUGHS,
            "notes.txt": "all 20 tests passed",
            "skipped.xml": junit("a:skipped", "b:skipped"),
            "reports/.keep": "",
        }
    )
    with (case / "huge.xml").open("wb") as handle:
        handle.truncate(40 * 1024 * 1024)
    (case / "passwd.xml").symlink_to("/etc/passwd")
    (case / "loop.xml").symlink_to("loop.xml")
    os.mkfifo(case / "fifo.xml")
    (case / "dir.xml").mkdir()
    return case


@pytest.mark.parametrize(
    ("report", "fact"),
    [
        ("missing.xml", "report missing.xml does not exist"),
        ("empty.xml", "report empty.xml is empty"),
        ("truncated.xml", "report truncated.xml is not well-formed XML (no element found"),
        ("laughs.xml", "report laughs.xml declares a DOCTYPE; refused"),
        ("notes.txt", "report notes.txt is not a test report"),
        ("huge.xml", "report huge.xml is 41943040 bytes, over the 16777216-byte cap"),
        ("passwd.xml", "report passwd.xml leaves the case dir"),
        ("../../etc/passwd", "report ../../etc/passwd leaves the case dir"),
        ("loop.xml", "report loop.xml is a symlink loop"),
        ("fifo.xml", "report fifo.xml is not a regular file (a FIFO)"),
        ("dir.xml", "report dir.xml is a directory, not a file"),
        ("reports/*.xml", "no file matches reports/*.xml"),
        ("skipped.xml", "no tests ran: 0 of 0 tests passed, 0 failed, 0 errored (2 skipped)"),
        ("*.xml", "report empty.xml is empty"),  # every file matched must be usable
    ],
)
@pytest.mark.parametrize("builtin", ["tests/pass_rate", "tests/all_passed"])
def test_unusable_reports_fail_with_the_fact(
    write_config: WriteConfig, make_case: MakeCase, builtin: str, report: str, fact: str
) -> None:
    result = run_judge(write_config, hostile_case(make_case), {"report": report}, builtin)
    failed = 0.0 if builtin == "tests/pass_rate" else False
    assert (result.value, type(result.value)) == (failed, type(failed))
    assert result.rationale.startswith(fact)


def test_a_report_in_a_format_other_than_the_one_given_fails(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    case = make_case({"report.xml": junit("a")})
    result = run_judge(write_config, case, {"report": "report.xml", "format": "pytest-json"})
    assert result.value == 0.0
    assert result.rationale.startswith("report report.xml is not valid JSON")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("{}", "pass_rate needs exactly one of report, runner"),
        ("{report: r.xml, format: xml}", "'xml' must be junit, pytest-json, go-json or ctrf"),
        ("{report: r.xml, min_tests: 0}", "must be a whole number of tests, 1 or more"),
        ("{report: r.xml, min_tests: 2.5}", "must be a whole number of tests, 1 or more"),
        ("{report: 'reports/[a.xml'}", "has an unclosed '['"),
        ("{report: '../*.xml'}", "must be relative, without '..'"),
        ("{report: r.xml, command: []}", "command must be a shell string or a list"),
        ("{report: r.xml, timeout: 0}", "must be a positive number"),
        ("{report: r.xml, env: [A]}", "must be a mapping of variable names to values"),
    ],
)
def test_bad_arguments_are_load_errors(
    write_config: WriteConfig, arguments: str, message: str
) -> None:
    config = write_config(f"judges:\n  - {{name: j, builtin: pass_rate, arguments: {arguments}}}\n")
    with pytest.raises(ConfigError) as caught:
        load_eval(config)
    assert message in caught.value.message


# --- with a command: only what the command wrote counts ---------------------------------


def test_a_command_writes_the_report_where_it_runs(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    """As root the command runs in a private copy of the case: the report it writes is
    read there (the probe), and the case itself is left as it was."""
    case = make_case({"expected.xml": junit("a", "b", "c:failure", "d")})
    command = "mkdir -p out && cp expected.xml out/report.xml"
    result = run_judge(write_config, case, {"report": "out/report.xml", "command": command})
    assert result.value == 0.75
    assert result.rationale.startswith("3 of 4 tests passed, 1 failed, 0 errored (0 skipped)")
    assert result.details["command"] == {"exit_code": 0, "signal": None, "timed_out": False}
    assert result.details["sandbox"]
    if os.geteuid() == 0:
        assert "private copy" in result.details["sandbox"]
        assert not (case / "out").exists()


def test_a_report_the_command_did_not_write_is_stale(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    case = make_case({"report.xml": junit("a", "b", "c")})  # the agent's "all passed"
    result = run_judge(write_config, case, {"report": "report.xml", "command": "true"})
    assert result.value == 0.0
    assert result.rationale == (
        "report report.xml is stale: the command did not write it (it was there)\n"
        "the command: exit code 0"
    )
    gate = run_judge(
        write_config, case, {"report": "report.xml", "command": "true"}, "tests/all_passed"
    )
    assert gate.value is False


def test_a_glob_counts_only_the_reports_the_command_wrote(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    case = make_case(
        {
            "reports/TEST-old.xml": junit(*(f"t{index}" for index in range(100))),
            "fresh.xml": junit("new_a", "new_b:failure"),
        }
    )
    command = ["cp", "fresh.xml", "reports/TEST-new.xml"]
    result = run_judge(write_config, case, {"report": "reports/TEST-*.xml", "command": command})
    assert result.value == 0.5
    assert result.details["tests"]["reports"] == ["reports/TEST-new.xml"]
    nothing = run_judge(write_config, case, {"report": "reports/TEST-*.xml", "command": "true"})
    assert nothing.value == 0.0
    assert nothing.rationale.startswith(
        "no file matching reports/TEST-*.xml was written by the command; 1 stale: "
        "reports/TEST-old.xml\nthe command: exit code 0"
    )


def test_a_rewritten_report_counts_even_when_its_size_is_the_same(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    before, after = junit("a", "b:failure"), junit("a", "b:skipped")
    assert len(before) == len(after)
    case = make_case({"report.xml": before, "new.xml": after})
    command = "sleep 0.05; cat new.xml > report.xml"  # the same file, rewritten in place
    result = run_judge(write_config, case, {"report": "report.xml", "command": command})
    assert result.rationale.startswith("1 of 1 tests passed")
    assert result.value == 1.0


def test_a_command_that_times_out_counts_no_report(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    case = make_case({"expected.xml": junit("a")})
    command = "cp expected.xml report.xml && sleep 10"
    arguments = {"report": "report.xml", "command": command, "timeout": 0.5}
    result = run_judge(write_config, case, arguments)
    assert (result.value, result.rationale) == (
        0.0,
        "the command timed out after 0.5s; no report counts",
    )
    assert result.details["command"]["timed_out"] is True


def test_a_command_that_writes_no_report_says_what_it_printed(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    case = make_case({"x.txt": "x"})
    command = "echo collected 0 items; exit 5"
    result = run_judge(write_config, case, {"report": "report.xml", "command": command})
    assert result.value == 0.0
    assert result.rationale == (
        "report report.xml does not exist\nthe command: exit code 5\ncollected 0 items"
    )


def test_the_command_gets_its_env_and_a_hostile_report_it_writes_still_fails(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    case = make_case({"laughs.xml": BILLION_LAUGHS})
    arguments = {
        "report": "out.xml",
        "command": 'cp "$SOURCE" out.xml',
        "env": {"SOURCE": "laughs.xml"},
    }
    result = run_judge(write_config, case, arguments)
    assert result.value == 0.0
    assert result.rationale.startswith("report out.xml declares a DOCTYPE; refused")


@pytest.fixture(scope="module")
def pytest_anyone_can_run() -> Iterator[tuple[str, dict[str, str]]]:
    """(python, env): pytest for the sandbox user. Run as root, the command runs as UID
    65534, which cannot read a venv under /root: a world-readable copy of pytest and
    what it imports, for the system's python of the same version."""
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if not os.access(python, os.X_OK):
        python = sys.executable
    root = Path(tempfile.mkdtemp(prefix="verifier-pytest-", dir="/tmp"))
    try:
        for name in ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py"):
            spec = importlib.util.find_spec(name)
            if spec is None or spec.origin is None:
                continue
            origin = Path(spec.origin)
            if origin.name == "__init__.py":
                shutil.copytree(origin.parent, root / name)
            else:
                shutil.copy(origin, root / origin.name)
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield python, {"PYTHONPATH": str(root)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_real_pytest_run_through_the_sandbox(
    write_config: WriteConfig, make_case: MakeCase, pytest_anyone_can_run
) -> None:
    python, env = pytest_anyone_can_run
    case = pytest_case(make_case)
    command = [
        python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--junitxml=report.xml",
        "test_calc.py",
    ]
    result = run_judge(write_config, case, {"report": "report.xml", "command": command, "env": env})
    assert result.value == 0.8
    assert result.rationale.startswith(f"{PYTEST_HEAD}report.xml (junit)")
    assert result.details["command"]["exit_code"] == 1  # pytest: some tests failed


# --- the docs ---------------------------------------------------------------------------

ROOT = REPO


def yaml_after(document: Path, heading: str) -> str:
    """The first ```yaml block after a heading of a markdown file."""
    text = document.read_text().split(heading, 1)[1]
    return text.split("```yaml\n", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize(
    ("document", "heading"),
    [
        (ROOT / "docs" / "builtins.md", "### Trusted test lists"),
        (ROOT / "docs" / "builtins.md", "### Examples, and what a report can prove"),
    ],
)
def test_the_documented_examples_load(
    write_config: WriteConfig, document: Path, heading: str
) -> None:
    config = load_eval(write_config(yaml_after(document, heading))).config
    assert config.judges[0].spec.name == "tests/pass_rate"
