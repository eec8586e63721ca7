"""The hardened test runners of tests/pass_rate and tests/all_passed (`runner:`).

With `runner`, the verifier builds the command itself, so that nothing the agent
leaves in the case changes which trusted tests run or how their outcomes are
reported; honest code still imports the usual way, run from the repo's root.

- `pytest`: the task's python (`executable`, python3 by default) runs the trusted
  launcher (pytest_launcher.py, handed to the sandbox as a provided file) isolated
  (`-I`); see the launcher for what it pins. The report is CTRF, written by the
  launcher outside the case copy ($VERIFIER_RESULTS).
  The launcher signs the report with a key handed over on stdin for this run alone.
  With `test_dir` the trusted tests are not the repo's: their files in
  $VERIFIER_PROVIDED/tests are empty stand-ins, and their sources come on stdin after
  the key (`handed`), so that the code under test finds nothing of them to read; their
  ids are relative to that dir, and `case_at` shows the case's copy where the tests
  expect it (a view: verifier.sandbox.views).
- `go`: `go test -json` with GOFLAGS emptied, GOTOOLCHAIN=local (a go.mod's
  `toolchain` line downloads nothing) and GOWORK=off (a go.work in the case redirects
  no module). Its events are read from go's own stdout, which the test binaries (the
  code of the case) do not hold: they write to go, which turns what they print into
  events; a run that did not end by itself (killed: the binary can signal go) counts
  no report. What Go cannot be kept from (go.mod's replace lines, vendor/, `_test.go`
  files and TestMain the agent adds, code that prints test2json's framing; before
  Go 1.20 any line that looks like a result) is for the guards: see docs/builtins.md.

A plan says how to run it, and how to probe the toolchain without the case (toolchain.py):
the probe runs only when the real run left no usable report, or ended with one of
`probe_codes` (pytest: an internal or usage error). A run that ends with `tampered_code`
(the launcher found the code under test rewriting pytest or itself) is a failure, its
report (if any) ignored and the toolchain not probed: whoever exits so, the case did.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from verifier.judges.builtins.testlists import TrustedTests, pytest_file
from verifier.sandbox.views import View

RUNNERS = ("pytest", "go")
LAUNCHER = Path(__file__).with_name("pytest_launcher.py")
INI_SUFFIXES = (".ini", ".cfg", ".toml")  # how pytest tells an ini's format (`-c`)
TESTS_NAME = "tests"  # the trusted tests of `test_dir` in $VERIFIER_PROVIDED
SOURCE_SUFFIX = ".py"  # what of test_dir is handed over on stdin, its file a stand-in
# Runs the launcher from $VERIFIER_PROVIDED with nothing but the standard library.
_BOOTSTRAP = (
    "import os, runpy; runpy.run_path(os.path.join(os.environ['VERIFIER_PROVIDED'], "
    f"'{LAUNCHER.name}'), run_name='__main__')"
)
_PYTEST_PROBE_CODES = (3, 4)  # pytest's internal error and usage error, and the launcher's
# The launcher's TAMPERED exit, and the line it prints before it (its TAMPERED_MARK).
PYTEST_TAMPERED = 7
PYTEST_TAMPERED_MARK = "pytest_launcher: the run was tampered with: "


# A runner's program as a word of a command line (`python -m pytest`, `/usr/bin/pytest-3`,
# `cd app && go test ./...`), not a name inside another word (`pytest.xml`, `tests/go`).
_BY_HAND = {
    "pytest": re.compile(r"(?:^|[\s;&|(`'\"/])(?:pytest|py\.test|pytest-3)(?=$|[\s;&|)`'\"])"),
    "go": re.compile(r"(?:^|[\s;&|(`'\"/])go\s+test(?=$|[\s;&|)`'\"])"),
}


def run_by_hand(command: str | Sequence[str]) -> str | None:
    """The runner (`pytest`, `go`) a hand-written command runs the tests with, if any:
    the command `runner:` would harden."""
    text = command if isinstance(command, str) else " ".join(command)
    return next((runner for runner, pattern in _BY_HAND.items() if pattern.search(text)), None)


@attrs.frozen
class RunnerPlan:
    name: str  # as in `runner:`
    programs: tuple[str, ...]  # resolved in the toolchain before the case is staged
    command: tuple[str, ...]
    probe: tuple[str, ...]  # run in an empty dir: exit 0 when the toolchain works
    provided: Mapping[str, Path]  # trusted files handed to both ($VERIFIER_PROVIDED)
    report: str | None  # the report's name in $VERIFIER_RESULTS; None: it is the stdout
    format: str  # reports.py's format of it
    env: Mapping[str, str]  # under the author's `env`
    probe_codes: tuple[int, ...] = ()
    signed: bool = False  # the report comes with its HMAC (<report>.sig) under a key on stdin
    tampered_code: int | None = None  # the exit of a run whose runner found tampering
    # the trusted tests' sources handed over on stdin after the key (name -> file), their
    # provided files empty stand-ins
    handed: Mapping[str, Path] = attrs.field(factory=dict)
    views: tuple[View, ...] = ()  # the case's copy where the tests expect it
    start_at: str = ""
    code_store: tuple[str, ...] = ()  # with the grader's byte code store: its flag (pyc_store)

    @property
    def label(self) -> str:
        return f"the verifier's {self.name} run"


@attrs.frozen
class PytestOptions:
    """What only the pytest runner takes: the trusted ini, the toolchain's plugin modules,
    and the repo's paths (files or dirs) whose native extension modules may load."""

    ini: Path | None = None
    plugins: tuple[str, ...] = ()
    native_modules: tuple[str, ...] = ()
    test_dir: Path | None = None  # the trusted tests, run from outside the case
    case_at: str | None = None  # where the case's copy is shown to them (a view)


def plan_runner(
    name: str,
    executable: str | None,
    paths: Sequence[str] | None,
    args: Sequence[str] | None,
    options: PytestOptions,
    tests: TrustedTests | None,
) -> RunnerPlan:
    if name == "pytest":
        return pytest_plan(executable or "python3", paths, args or (), options, tests)
    return go_plan(executable or "go", paths, args or ())


def pytest_plan(
    python: str,
    paths: Sequence[str] | None,
    args: Sequence[str],
    options: PytestOptions,
    tests: TrustedTests | None,
) -> RunnerPlan:
    """The launcher, with the trusted ini (or none), the plugins, the native modules it
    may load, then `args` and the paths: those given, else the files the listed tests
    are in, else none (pytest then runs the ini's testpaths, or the whole repo; with
    `test_dir`, the whole of it). With `test_dir` the paths and ids are relative to it."""
    if paths is None:
        paths = sorted({pytest_file(test) for test in tests.ids}) if tests else ()
    ini = options.ini
    flags = ["--ini", ini.name] if ini is not None else []
    provided: dict[str, Path] = {LAUNCHER.name: LAUNCHER, **({ini.name: ini} if ini else {})}
    handed: dict[str, Path] = {}
    if options.test_dir is not None:
        flags += ["--tests", TESTS_NAME]
        paths = paths or (".",)
        for relative, file in test_files(options.test_dir):
            hidden = relative.endswith(SOURCE_SUFFIX)
            provided[f"{TESTS_NAME}/{relative}"] = Path(os.devnull) if hidden else file
            if hidden:
                handed[relative] = file
    views = (View(options.case_at, "case"),) if options.case_at else ()
    for plugin in options.plugins:
        flags += ["--plugin", plugin]
    for native in options.native_modules:
        flags += ["--native", native]
    launcher = (python, "-I", "-c", _BOOTSTRAP)
    return RunnerPlan(
        name="pytest",
        programs=(python,),
        command=(*launcher, "--report", "ctrf.json", *flags, "--", *args, *paths),
        probe=(*launcher, "--probe", *flags, "--", *args),
        provided=provided,
        report="ctrf.json",
        format="ctrf",
        env={},
        probe_codes=_PYTEST_PROBE_CODES,
        signed=True,
        tampered_code=PYTEST_TAMPERED,
        handed=handed,
        views=views,
        start_at=options.case_at or "",
        code_store=("--pyc",),
    )


def with_code_store(plan: RunnerPlan, provided: Mapping[str, Path]) -> RunnerPlan:
    """The plan whose launcher uses the grader's byte code store: its flag before the
    launcher's own options, and the store's files for this run handed over too."""
    at = len(plan.command) - len(plan.command[plan.command.index("--report") :])
    return attrs.evolve(
        plan,
        command=(*plan.command[:at], *plan.code_store, *plan.command[at:]),
        provided={**plan.provided, **provided},
    )


def test_files(directory: Path) -> list[tuple[str, Path]]:
    """Every file beneath `directory` (the author's own: symlinks followed) by its
    relative path, but byte code."""
    return sorted(
        (path.relative_to(directory).as_posix(), path)
        for path in directory.rglob("*")
        if path.is_file() and "__pycache__" not in path.relative_to(directory).parts
    )


def handed_input(key: bytes, handed: Mapping[str, Path]) -> bytes:
    """What the launcher reads on stdin with --tests: the key, then each source's name
    and bytes, each part after its length (4 bytes, big endian). OSError when a source
    cannot be read (the author's fault)."""
    parts = [key]
    for name, file in sorted(handed.items()):
        parts += [name.encode("utf-8", "surrogateescape"), file.read_bytes()]
    return b"".join(len(part).to_bytes(4, "big") + part for part in parts)


def go_plan(go: str, packages: Sequence[str] | None, args: Sequence[str]) -> RunnerPlan:
    return RunnerPlan(
        name="go",
        programs=(go,),
        command=(go, "test", "-json", *args, *(packages or ("./...",))),
        probe=(go, "version"),
        provided={},
        report=None,
        format="go-json",
        env={"GOFLAGS": "", "GOTOOLCHAIN": "local", "GOWORK": "off"},
    )


def ini_problem(path: Path) -> str | None:
    """What keeps a file from being pytest's `-c` ini: pytest reads it by its suffix."""
    if path.name == LAUNCHER.name or path.suffix not in INI_SUFFIXES:
        return (
            "must be pytest's configuration: pytest.ini, tox.ini, setup.cfg, "
            "pyproject.toml (a name ending .ini, .cfg or .toml)"
        )
    return None


def program_problem(program: str) -> str | None:
    """What keeps `executable` from naming a program of the toolchain: a relative path
    (`.venv/bin/python`) resolves in the case's copy, whose files are the agent's."""
    if "/" in program and not program.startswith("/"):
        return (
            "is a path into the case, whose files are the agent's: name the toolchain's "
            "program (python3, go: found in PATH) or give its absolute path outside the case"
        )
    return None
