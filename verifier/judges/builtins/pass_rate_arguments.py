"""The arguments of `tests/pass_rate` and `tests/all_passed`, as one record
(PassRateArguments), and the rules between them: where the report comes from
(`report`, with or without `command`, or `runner`), which tests count (`tests`,
`fail_to_pass`, `pass_to_pass`), and what only a runner takes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from verifier.config import Locator
from verifier.config.fields import Choice, Number, Text
from verifier.globs import Glob
from verifier.judges.builtins.arguments import (
    CommandLine,
    Environment,
    ImagePath,
    PathOrGlob,
    ProvidedFiles,
    ReferencePath,
    TestIdList,
    Words,
)
from verifier.judges.builtins.process import TIMEOUT
from verifier.judges.builtins.registry import argument
from verifier.judges.builtins.reports import FORMATS
from verifier.judges.builtins.runners import RUNNERS, PytestOptions, ini_problem, program_problem
from verifier.judges.builtins.testlists import GROUPS, TrustedTests, overlap, pytest_file

ONE_SOURCE = (("report", "runner"),)
_RUNNER_ONLY = (
    "executable",
    "paths",
    "args",
    "ini",
    "plugins",
    "native_modules",
    "test_dir",
    "case_at",
)
_PYTEST_ONLY = ("ini", "plugins", "native_modules", "test_dir", "case_at")
_ID_SHAPES = {
    "pytest": ("::", "a pytest node id (path::name)"),
    "go": ("/", "a go test id (Package/TestName)"),
}


@attrs.frozen(kw_only=True)
class PassRateArguments:
    """Where the report comes from (exactly one of `report` and `runner`), the command
    that writes it and what it is handed, how many tests must run, the trusted lists of
    the tests that count, and what only `runner:` takes."""

    report: str | Glob | None = argument(PathOrGlob())
    format: str | None = argument(
        Choice(FORMATS, description="detected from the report when not given")
    )
    command: str | list[str] | None = argument(
        CommandLine(description="run first (sandboxed); writes the report")
    )
    timeout: float = argument(TIMEOUT, default=30)
    env: dict[str, str] | None = argument(Environment())
    provide: dict[str, PurePosixPath] | None = argument(ProvidedFiles())
    min_tests: int = argument(
        Number(
            minimum=1,
            integer=True,
            problem="must be a whole number of tests, 1 or more",
            description="fewer tests run (skipped ones aside) is a failure",
        ),
        default=1,
    )
    tests: tuple[str, ...] | None = argument(
        TestIdList(
            description="only these tests count (a missing or skipped one counts as failed): "
            "a list of ids, or a file beside eval.yaml"
        )
    )
    fail_to_pass: tuple[str, ...] | None = argument(
        TestIdList(description="SWE-bench's FAIL_TO_PASS: the tests the fix must make pass")
    )
    pass_to_pass: tuple[str, ...] | None = argument(
        TestIdList(description="SWE-bench's PASS_TO_PASS: the tests that must keep passing")
    )
    runner: str | None = argument(
        Choice(
            RUNNERS,
            description="the verifier runs the tests itself, hardened against the case "
            "(instead of report and command)",
        )
    )
    executable: str | None = argument(
        Text(
            non_empty=True,
            description="the runner's program in the toolchain: python3 (pytest) or go, a "
            "name found in PATH or an absolute path",
            check=program_problem,
        )
    )
    paths: tuple[str, ...] | None = argument(
        Words(
            description="what the runner runs: pytest's files or dirs (default: the listed "
            "tests' files, else the ini's testpaths), go's packages (default ./...)"
        )
    )
    args: tuple[str, ...] | None = argument(
        Words(description="more arguments for pytest or go test, after the verifier's")
    )
    ini: PurePosixPath | None = argument(
        ReferencePath(
            kind="file",
            check=ini_problem,
            description="runner pytest: the trusted pytest configuration beside eval.yaml "
            "(pytest.ini, tox.ini, setup.cfg, pyproject.toml); default: none",
        )
    )
    plugins: tuple[str, ...] | None = argument(
        Words(
            description="runner pytest: plugin modules of the toolchain to load (autoload is "
            "off), e.g. pytest_timeout"
        )
    )
    test_dir: PurePosixPath | None = argument(
        ReferencePath(
            kind="dir",
            description="runner pytest: the trusted tests, a dir beside eval.yaml run from "
            "outside the case (ids and paths relative to it); their sources reach the "
            "launcher on stdin, never as files the code under test could read",
        )
    )
    case_at: str | None = argument(
        ImagePath(
            description="runner pytest: where the tests find the case (a private copy shown "
            "at this path, e.g. /app: user namespaces needed); they run there"
        )
    )
    native_modules: tuple[str, ...] | None = argument(
        Words(
            description="runner pytest: the repo's files or dirs whose native extension "
            "modules may load (modules built in place); any other one the tests load voids "
            "the run"
        )
    )

    @property
    def lists(self) -> dict[str, tuple[str, ...] | None]:
        """The trusted lists by group (`tests`, `fail_to_pass`, `pass_to_pass`)."""
        return {
            "tests": self.tests,
            "fail_to_pass": self.fail_to_pass,
            "pass_to_pass": self.pass_to_pass,
        }

    def listed(self) -> TrustedTests | None:
        """The tests that count, None when every test of the report does."""
        return TrustedTests.of(self.lists)

    def pytest_options(self, config_dir: Path) -> PytestOptions:
        """What only the pytest runner takes, its ini found beside eval.yaml."""
        return PytestOptions(
            ini=config_dir / self.ini if self.ini is not None else None,
            plugins=self.plugins or (),
            native_modules=self.native_modules or (),
            test_dir=config_dir / self.test_dir if self.test_dir is not None else None,
            case_at=self.case_at,
        )


def check_arguments(given: Mapping[str, Any], arguments: PassRateArguments, at: Locator) -> None:
    """Load errors for arguments that do not go together."""
    runner = arguments.runner
    if runner is None:
        extra = next((name for name in _RUNNER_ONLY if name in given), None)
        if extra is not None:
            raise at.child(extra).error("is an argument of `runner:` (pytest or go)")
    else:
        for name in ("format", "command", "provide", *(_PYTEST_ONLY if runner == "go" else ())):
            if name in given:
                raise at.child(name).error(f"does not go with runner: {runner}")
    for native in arguments.native_modules or ():
        if native.startswith("/") or ".." in native.split("/"):
            raise at.child("native_modules").error(
                f"{native!r} must be a path inside the repo, relative to its root"
            )
    lists = arguments.lists
    clash = overlap(lists)
    if clash is not None:
        test, first, second = clash
        raise at.child(second).error(f"{test!r} is also in {first}: list a test once")
    if runner is not None:
        for group in GROUPS:
            for test in lists[group] or ():
                problem = _runner_id_problem(runner, test)
                if problem is not None:
                    raise at.child(group).error(f"{test!r} {problem}")


def _runner_id_problem(runner: str, test: str) -> str | None:
    """What keeps a listed id from naming a test the runner runs, or None."""
    mark, shape = _ID_SHAPES[runner]
    if mark not in test:
        return f"is not {shape}"
    path = pytest_file(test) if runner == "pytest" else ""
    if path.startswith("/") or ".." in path.split("/"):
        return "names a file outside the repo"
    return None
