"""Figures for the hardened pytest runner on real projects' own suites, beside plain pytest.

Downloads the sdists of more-itertools 10.5.0 and attrs 26.1.0 from PyPI (their own
tests; nothing of theirs is kept in this repository), into .cache/bench-pass-rate,
with toolchains any UID can run (venvs of the system's python). Then, on the same
tree:

- counts: each suite run by plain pytest (`python -m pytest -q -p no:cacheprovider
  tests`) and graded by `verifier grade` through `tests/pass_rate` + `runner: pytest`
  must count the same tests passed, failed and skipped (the launcher's false
  positives: none, or the bench fails);
- time: more-itertools' suite, `--runs` rounds, each running in turn (the order
  rotating) plain pytest, plain pytest with no byte code cached (the launcher never
  reads the repo's), pytest with the launcher's own arguments, the launcher run
  directly (no verifier, no sandbox) without and with the grader's byte code store
  for the tree (pyc_store.py: made before the rounds as a grade makes it), the
  launcher with one of its checks taken out (the audit hook's watch, the pins checked
  at each test, the strict assertions), and `verifier grade` (its store filled by the
  two grades before the rounds, as a third grade of the same tests finds it): the
  median wall and CPU time of each, and its ratio to plain pytest's. The grade's
  target: at most 1.15x plain pytest's wall time. more-itertools is timed with a
  toolchain of pytest alone (as a task image has it), attrs counted with one that also
  holds what its suite imports.

    python bench/pass_rate.py [--runs 5] [--skip-attrs] [--baseline main]

`--baseline REV` also times the launcher of that git revision run directly, and
`verifier grade` of a regular install of it, in the same rounds.

It grades with a regular install of this checkout (see bench/common.py).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from common import REPO, installed_revision, installed_verifier

TARGET_RATIO = 1.15
CACHE = REPO / ".cache" / "bench-pass-rate"
LAUNCHER = REPO / "verifier" / "judges" / "builtins" / "pytest_launcher.py"
# name: (version, the paths pytest runs, the trusted ini's text or None, its toolchain)
PROJECTS = {
    "more-itertools": ("10.5.0", ("tests",), None, "pytest"),
    "attrs": ("26.1.0", ("tests",), "[pytest]\npythonpath = src\n", "attrs"),
}
# What each toolchain holds: pytest alone (as a task image has it: plain pytest loads
# no other plugin), or with what attrs' suite imports (hypothesis' plugin among them).
TOOLCHAINS = {
    "pytest": ("pytest==9.2.0",),
    "attrs": ("pytest==9.2.0", "hypothesis==6.170.17", "pympler==1.1", "cloudpickle==3.1.3"),
}
BOOTSTRAP = (
    "import os, runpy; runpy.run_path(os.path.join(os.environ['VERIFIER_PROVIDED'], "
    "'pytest_launcher.py'), run_name='__main__')"
)
# A launcher with one of its checks taken out: (name, the text replaced, its stand-in).
ABLATIONS = (
    (
        "launcher, the audit watching only its own events",
        "        watched = _AUDITED\n",
        (
            "        watched = frozenset(_FORWARDED) | "
            "{'pytest_launcher.of_case', 'pytest_launcher.getframe', "
            "'pytest_launcher.signal', 'pytest_launcher.compare', 'pytest_launcher.pyc'}\n"
        ),
    ),
    (
        "launcher, pins not checked at each test",
        "            self.integrity.check_test(nodeid)\n",
        "            pass\n",
    ),
    (
        "launcher, assertions not strict",
        "    run.assertions = _strict_assertions(Assertions())\n",
        "    run.assertions = Assertions()\n",
    ),
)
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?)\b")
_AS_CTRF = {"xfailed": "skipped", "xpassed": "passed", "error": "failed", "errors": "failed"}


def toolchain(name: str) -> str:
    """The python of a venv any UID can run (the sandbox runs the tests as another one)."""
    base = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not os.access(base, os.X_OK):
        base = Path(sys.executable).resolve()
    packages = TOOLCHAINS[name]
    venv = CACHE / f"toolchain-{name}"
    stamp = venv / "installed"
    if not stamp.exists() or stamp.read_text() != "\n".join(packages):
        subprocess.run([str(base), "-m", "venv", "--clear", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *packages]
        subprocess.run(pip, check=True)
        stamp.write_text("\n".join(packages))
    _open_to_all(CACHE)
    return str(venv / "bin" / "python")


def tree(name: str, version: str, python: str) -> Path:
    """The project's sdist from PyPI, unpacked (once) where any UID can read it."""
    target = CACHE / "trees" / f"{name}-{version}"
    if not target.is_dir():
        download = CACHE / "sdists"
        pip = [python, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        subprocess.run([*pip, "--dest", str(download), f"{name}=={version}"], check=True)
        archive = next(download.glob(f"{name.replace('-', '?')}-{version}.tar.gz"))
        with tarfile.open(archive) as opened:
            opened.extractall(target.parent, filter="data")
        unpacked = target.parent / archive.name.removesuffix(".tar.gz")
        if unpacked != target:
            unpacked.rename(target)
    _open_to_all(CACHE)
    return target


def _open_to_all(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | (0o755 if path.is_dir() else 0o444))


def grade_config(python: str, paths: Sequence[str], ini: str | None, where: Path) -> Path:
    """eval.yaml: the pass rate of the suite, run by the hardened runner."""
    arguments: dict[str, object] = {
        "runner": "pytest",
        "executable": python,
        "paths": list(paths),
        "timeout": 900,
    }
    if ini is not None:
        (where / "pytest.ini").write_text(ini)
        arguments["ini"] = "pytest.ini"
    config = where / "eval.yaml"
    config.write_text(
        "judges:\n  - name: tests\n    builtin: tests/pass_rate\n    timeout: 1200\n"
        f"    arguments: {json.dumps(arguments)}\n"
        "reward: {judge: tests, on_error: fail}\n"
    )
    return config


class Runner:
    """The commands measured on one tree, each a callable running it once."""

    def __init__(
        self, python: str, verifier: str, case: Path, paths: Sequence[str], ini: str | None
    ):
        self.python = python
        self.case = case
        self.paths = list(paths)
        self.scratch = Path(tempfile.mkdtemp(prefix="bench-pass-rate-"))
        self.config = grade_config(python, paths, ini, self.scratch)
        self.ini = ini
        self.verifier = verifier
        self.plain_env = {**_base_env(), **({"PYTHONPATH": "src"} if ini else {})}
        self.store: Path | None = None  # the byte code store's entries for the tree

    def plain(self, *extra: str, env: Mapping[str, str] | None = None) -> str:
        command = [self.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra]
        return _run([*command, *self.paths], self.case, env or self.plain_env)

    def plain_uncached(self) -> str:
        """Plain pytest on a copy of the tree where no byte code is cached or written
        (the launcher compiles the repo's modules and rewrites its tests every run)."""
        fresh = self.scratch / "uncached"
        if not fresh.is_dir():
            shutil.copytree(self.case, fresh, ignore=shutil.ignore_patterns("__pycache__"))
        command = [self.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *self.paths]
        return _run(command, fresh, {**self.plain_env, "PYTHONDONTWRITEBYTECODE": "1"})

    def launcher_arguments(self) -> str:
        """pytest with the launcher's own arguments and environment, no launcher."""
        flags = ["-c", os.devnull, "--rootdir", str(self.case), "--confcutdir", str(self.case)]
        flags += ["--import-mode=append", "--color=no"]
        env = {**self.plain_env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        return self.plain(*flags, env=env)

    def launcher(
        self, source: str | None = None, store: bool = True, fill: str | None = None
    ) -> str:
        """The launcher run directly in the tree (as the sandbox runs it, without it); with
        `store`, handed the entries of the grader's byte code store for the tree as a
        grade is (made by store_entries; `fill` names what to compile, as a grade's
        first runs do)."""
        provided = Path(tempfile.mkdtemp(dir=self.scratch))
        results = Path(tempfile.mkdtemp(dir=self.scratch))
        (provided / LAUNCHER.name).write_text(source or LAUNCHER.read_text())
        options = []
        if self.ini is not None:
            (provided / "pytest.ini").write_text(self.ini)
            options = ["--ini", "pytest.ini"]
        if store:
            options.append("--pyc")
            if fill is not None:
                (provided / "pyc-fill.txt").write_text(fill)
            elif self.store is not None:
                shutil.copytree(self.store, provided / "pyc")
        command = [self.python, "-I", "-c", BOOTSTRAP, "--report", "ctrf.json", *options, "--"]
        env = {**_base_env(), "VERIFIER_PROVIDED": str(provided), "VERIFIER_RESULTS": str(results)}
        _run([*command, *self.paths], self.case, env, stdin=secrets.token_bytes(32))
        if fill is not None:
            return (results / "pyc-entries.json").read_text()
        if store:
            return (results / "pyc-seen.json").read_text()
        return (results / "ctrf.json").read_text()

    def store_entries(self) -> None:
        """The grader's store for the tree, as two grades leave it: what the launcher
        imported, compiled before the tests run (bench/pass_rate.py's own dir)."""
        seen = json.loads(self.launcher(store=True))["seen"]
        fill = "".join(f"{kind}\t{path}\n" for kind, path, *_ in seen)
        store = self.scratch / "store"
        for entry in json.loads(self.launcher(store=True, fill=fill))["entries"]:
            target = store / entry["sha256"] / entry["variant"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(base64.b64decode(entry["data"]))
        _open_to_all(store)
        self.store = store

    def grade(self) -> str:
        out = Path(tempfile.mkdtemp(dir=self.scratch))
        command = [self.verifier, "grade", "--config", str(self.config)]
        _run([*command, "--case", str(self.case), "--out", str(out / "out")], None, _base_env())
        return (out / "out" / "ctrf.json").read_text()


def _base_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": "/tmp"}  # noqa: S108 (the bench's own runs)


def _run(
    command: list[str], cwd: Path | None, env: Mapping[str, str], stdin: bytes | None = None
) -> str:
    completed = subprocess.run(
        command, cwd=cwd, env=dict(env), input=stdin, capture_output=True, check=False
    )
    if completed.returncode not in (0, 1):  # 1: some tests failed (attrs' own, here)
        raise SystemExit(
            f"{' '.join(command[:4])}... exited {completed.returncode}:\n"
            + completed.stdout.decode(errors="replace")[-3000:]
            + completed.stderr.decode(errors="replace")[-3000:]
        )
    return completed.stdout.decode(errors="replace")


def plain_counts(output: str) -> dict[str, int]:
    """passed, failed, skipped of pytest's last line, as CTRF counts them."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    last = [line for line in output.splitlines() if line.strip()][-1]
    for number, word in _COUNT.findall(last):
        counts[_AS_CTRF.get(word, word)] += int(number)
    return counts


def ctrf_counts(document: str) -> dict[str, int]:
    summary = json.loads(document)["results"]["summary"]
    return {key: summary[key] for key in ("passed", "failed", "skipped")}


def timed(run: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run, the CPU its processes and their children used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def ablated(old: str, new: str) -> str:
    source = LAUNCHER.read_text()
    if source.count(old) != 1:
        raise SystemExit(f"bench/pass_rate.py: the launcher no longer holds {old.strip()!r}")
    return source.replace(old, new)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds of the timed commands")
    parser.add_argument("--skip-attrs", action="store_true", help="count more-itertools only")
    parser.add_argument(
        "--baseline", metavar="REV", help="also time the launcher and grade of this revision"
    )
    options = parser.parse_args(argv)
    verifier = installed_verifier()
    runners = {}
    for name, (version, paths, ini, tools) in PROJECTS.items():
        if name == "attrs" and options.skip_attrs:
            continue
        python = toolchain(tools)
        runners[name] = Runner(python, verifier, tree(name, version, python), paths, ini)

    failed = False
    print("counts (passed, failed, skipped): plain pytest | verifier grade, runner: pytest")
    for name, runner in runners.items():
        plain, graded = plain_counts(runner.plain()), ctrf_counts(runner.grade())
        same = plain == graded
        failed |= not same
        print(f"  {name}: {plain} | {graded}: {'the same' if same else 'DIFFERENT'}")

    subject = runners["more-itertools"]
    commands: list[tuple[str, Callable[[], object]]] = [
        ("plain pytest", subject.plain),
        ("plain pytest, no byte code cached", subject.plain_uncached),
        ("pytest with the launcher's arguments", subject.launcher_arguments),
        ("the launcher alone, no byte code store", _bound(subject.launcher, None, False)),
        ("the launcher alone (no verifier, no sandbox)", _bound(subject.launcher, None)),
        *[(label, _bound(subject.launcher, ablated(old, new))) for label, old, new in ABLATIONS],
        ("verifier grade, runner: pytest", subject.grade),
    ]
    if options.baseline:
        base_verifier, commit = installed_revision(options.baseline)
        base_launcher = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{commit}:{LAUNCHER.relative_to(REPO)}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        base = Runner(subject.python, base_verifier, subject.case, subject.paths, subject.ini)
        commands += [
            (
                f"the launcher of {options.baseline} alone",
                _bound(subject.launcher, base_launcher, "--pyc" in base_launcher),
            ),
            (f"verifier grade of {options.baseline}", base.grade),
        ]
    subject.store_entries()
    subject.grade()  # the grader's store as two grades leave it (the counts' grade the first)
    samples: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in commands}
    for round_ in range(options.runs):
        for label, run in commands[round_ % len(commands) :] + commands[: round_ % len(commands)]:
            samples[label].append(timed(run))
    plain_wall = statistics.median(wall for wall, _ in samples["plain pytest"])
    plain_cpu = statistics.median(cpu for _, cpu in samples["plain pytest"])
    print(f"\nmore-itertools {PROJECTS['more-itertools'][0]}'s suite, median of {options.runs}:")
    print(f"  {'':52} {'wall s':>7} {'ratio':>6} {'CPU s':>7} {'ratio':>6}")
    for label, _ in commands:
        wall = statistics.median(wall for wall, _ in samples[label])
        cpu = statistics.median(cpu for _, cpu in samples[label])
        print(
            f"  {label:52} {wall:7.2f} {wall / plain_wall:5.2f}x {cpu:7.2f} {cpu / plain_cpu:5.2f}x"
        )
    ratio = statistics.median(wall for wall, _ in samples["verifier grade, runner: pytest"])
    ratio /= plain_wall
    met = ratio <= TARGET_RATIO
    print(
        f"\ntarget: verifier grade <= {TARGET_RATIO}x plain pytest's wall time: "
        f"{ratio:.2f}x, {'met' if met else 'NOT met'}"
    )
    for runner in runners.values():
        shutil.rmtree(runner.scratch, ignore_errors=True)
    return 1 if failed else 0


def _bound(
    launcher: Callable[[str | None, bool], str], source: str | None, store: bool = True
) -> Callable[[], str]:
    return lambda: launcher(source, store)


if __name__ == "__main__":
    sys.exit(main())
