"""The trusted pytest launcher of `runner: pytest` (tests/pass_rate, tests/all_passed).

The grader copies this file into the sandbox ($VERIFIER_PROVIDED) and the task's own
python runs it isolated (`python -I`: neither the working dir nor the script's dir on
sys.path, no PYTHON* variables, no user site-packages), in the private copy of the
case. It is a plain script for any Python 3.8 or later and imports nothing of the
verifier, whose interpreter the toolchain need not have.

What the case cannot change, and how:
- pytest, every module of its own package, the plugins the task author named and the
  modules this script uses are imported before anything of the case can be. Then the
  case's root is searched *last*, after the standard library, the installed packages
  and the test dirs pytest adds (`--import-mode=append`): honest code imports the usual
  way (`from calc import add`), and no module the case holds shadows one of the
  standard library, an installed package, or a trusted test's helper beside it.
- Plugin autoload is off (PYTEST_DISABLE_PLUGIN_AUTOLOAD), so no entry point of a
  `*.dist-info` or `*.egg-info` in the case is loaded; the author's plugins are
  registered as the modules imported here. PYTEST_ADDOPTS and PYTEST_PLUGINS are
  dropped.
- The configuration is the one the grader names (`-c`: the author's trusted ini, or
  none), so the case's pytest.ini, tox.ini, setup.cfg and pyproject.toml are never
  read; `--rootdir` and `--confcutdir` are the working dir. A `pythonpath` of the
  trusted ini is taken relative to the working dir, as it was in the author's repo.
- Byte code is never read from the case: its modules are compiled from their source
  (a path hook for the case's dirs, which also puts a `.py` before a planted `.so` of
  the same name), and pytest's assertion-rewrite cache is a fresh dir, so a planted
  `__pycache__/*.pyc` (unchecked-hash, or pytest's own) replaces no trusted module.
- The report (CTRF JSON) is written by this script, outside the case copy, to
  $VERIFIER_RESULTS/<--report>, with its HMAC-SHA256 beside it (<--report>.sig) under a
  key the grader hands over on stdin for this run alone: read, and stdin closed,
  before any code of the case runs. A report the code under test writes itself (and
  then ends the run before this script could write the real one) does not verify.

What it cannot stop, and the recommended gate's guards must: a `conftest.py` (pytest
imports it as a plugin). And the code under test runs in this process: code written to
subvert this very script (patching pytest's internals, or finding the signing key in
the interpreter's memory) is beyond any runner in the same process.

`--probe`: the same imports and pytest arguments in an empty dir, collecting nothing.
Exit 0 when the toolchain can run the tests at all; else PROBE_FAILED, with the reason
on stderr. The grader runs it only when the real run left no usable report, to tell a
fault of the toolchain (an error) from what the case did (a failure).
"""

import contextlib
import hashlib
import hmac
import importlib
import importlib.machinery
import json
import os
import sys
import tempfile
import time

PROBE_FAILED = 3
_LAZY_STDLIB = (
    # imported by pytest only when needed: here before the case is on sys.path
    "difflib",
    "doctest",
    "faulthandler",
    "getpass",
    "grp",
    "inspect",
    "pdb",
    "pickle",
    "pwd",
    "shutil",
    "tracemalloc",
    "unittest",
    "importlib.metadata",
)
_OPTIONAL = ("packaging.version", "exceptiongroup", "tomllib", "tomli", "iniconfig", "pluggy")
_RANK = {"passed": 0, "skipped": 1, "errored": 2, "failed": 3}
_MESSAGE_CHARS = 1000
_TRACE_CHARS = 8000


def main(argv):
    signer = _take_signer()
    options, pytest_args = _parse(argv)
    workdir = os.getcwd()
    _isolate(workdir)
    try:
        pytest = _import_trusted()
        plugins = [importlib.import_module(name) for name in options["plugins"]]
    except Exception as error:  # the toolchain cannot run pytest: no case is involved yet
        sys.stderr.write(f"the toolchain cannot import pytest or its plugins: {error!r}\n")
        return PROBE_FAILED
    ini = os.path.join(os.path.dirname(os.path.abspath(__file__)), options["ini"])
    fixed = [
        "-c",
        ini if options["ini"] else os.devnull,
        "--rootdir",
        workdir,
        "--confcutdir",
        workdir,
        "--import-mode=append",
        "-p",
        "no:cacheprovider",
        "--color=no",
    ]
    if options["probe"]:
        # No testpaths: in an empty dir they match nothing, and pytest warns of that
        # (an error under the ini's `filterwarnings = error`).
        probe = [*fixed, "--collect-only", "-o", "testpaths=", *pytest_args]
        code = pytest.main(probe, plugins=plugins)
        if int(code) in (0, 5):  # 5: no tests collected, as in an empty dir
            return 0
        sys.stderr.write(f"pytest refused to run with these arguments (exit {int(code)})\n")
        return PROBE_FAILED
    reporter = Reporter(workdir, bool(options["ini"]), signer)
    pytest_args = _fresh_rewrite_cache(pytest_args)
    sys.meta_path.append(_CaseRoot(workdir))
    code = pytest.main([*fixed, *pytest_args], plugins=[reporter, *plugins])
    reporter.write(os.path.join(os.environ["VERIFIER_RESULTS"], options["report"]), pytest, code)
    return int(code)


def _take_signer():
    """An HMAC of the key the grader writes on stdin (nothing when there is none), read
    to its end; stdin is /dev/null from then on, so nothing run later can read it."""
    chunks = []
    while True:
        try:
            chunk = os.read(0, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    key = b"".join(chunks)
    return hmac.new(key, digestmod=hashlib.sha256) if key else None


def _parse(argv):
    """--report NAME, --ini NAME, --plugin MODULE (repeated), --probe, then `--` and
    pytest's own arguments."""
    options = {"report": "ctrf.json", "ini": "", "plugins": [], "probe": False}
    rest = list(argv)
    while rest:
        item = rest.pop(0)
        if item == "--":
            break
        if item == "--probe":
            options["probe"] = True
        elif item in ("--report", "--ini", "--plugin") and rest:
            value = rest.pop(0)
            if item == "--plugin":
                options["plugins"].append(value)
            else:
                options[item[2:]] = value
        else:
            raise SystemExit(f"pytest_launcher: unknown argument {item!r}")
    return options, rest


def _isolate(workdir):
    """Nothing of the case on sys.path yet, none of its byte code ever read, no plugin
    loaded by entry point or variable."""
    sys.path[:] = [entry for entry in sys.path if entry and not _within(entry, workdir)]
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        os.environ.pop(name, None)
    sys.path_hooks.insert(0, _source_only_hook(workdir))
    sys.path_importer_cache.clear()


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles a module of the case from its source: never from a `__pycache__` the
    case holds (an unchecked-hash .pyc is otherwise loaded without a look at the source),
    and never writes one there."""

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


def _source_only_hook(workdir):
    """The finder of the dirs in the case: sources first, then extension modules, and no
    bare .pyc files."""
    machinery = importlib.machinery
    finder = machinery.FileFinder.path_hook(
        (_SourceOnlyLoader, machinery.SOURCE_SUFFIXES),
        (machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES),
    )

    def hook(path):
        if not _within(path or os.getcwd(), workdir):
            raise ImportError("not a dir of the case")
        return finder(path)

    return hook


class _CaseRoot:
    """The finder of last resort: a top-level module in the case's root, found only when
    no entry of sys.path has it (so after the test dirs pytest appends, too)."""

    def __init__(self, workdir):
        self.workdir = workdir

    def find_spec(self, name, path=None, target=None):
        if path is not None:  # a submodule: found through its package's __path__
            return None
        return importlib.machinery.PathFinder.find_spec(name, [self.workdir], target)

    def invalidate_caches(self):
        importlib.machinery.PathFinder.invalidate_caches()


def _fresh_rewrite_cache(pytest_args):
    """pytest's rewritten test modules are cached beside them; read them from a fresh dir
    (pytest before 6: no rewriting at all, it has no way to move its cache)."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return pytest_args
    if not hasattr(rewrite, "get_cache_dir"):
        return ["--assert=plain", *pytest_args]
    from pathlib import Path

    cache = Path(tempfile.mkdtemp(prefix="pytest-rewrite-"))
    rewrite.get_cache_dir = lambda file_path: cache.joinpath(*file_path.parts[1:-1])
    return pytest_args


def _within(path, directory):
    path = os.path.abspath(path)
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _import_trusted():
    """pytest and the whole of its own package, and what it imports only when needed."""
    import pkgutil

    pytest = importlib.import_module("pytest")  # first: a toolchain without it is named
    _pytest = importlib.import_module("_pytest")

    for found in pkgutil.walk_packages(_pytest.__path__, "_pytest."):
        with contextlib.suppress(Exception):  # a module of another platform, say
            importlib.import_module(found.name)
    for name in _LAZY_STDLIB + _OPTIONAL:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    return pytest


class Reporter:
    """A pytest plugin: each test's outcome by node id (the worst of its phases), each
    module that failed to collect, then the report in CTRF."""

    def __init__(self, workdir, trusted_ini, signer):
        self.workdir = workdir
        self.trusted_ini = trusted_ini
        self.signer = signer
        self.tests = {}
        self.start = _now_ms()

    def pytest_load_initial_conftests(self, early_config):
        """`pythonpath` of the trusted ini is relative to the ini, which is not in the
        repo: point those sys.path entries at the working dir (before any conftest)."""
        inipath = getattr(early_config, "inipath", None)
        if not self.trusted_ini or inipath is None:
            return
        base = str(inipath.parent)
        for index, entry in enumerate(sys.path):
            if _within(entry, base):
                sys.path[index] = os.path.join(self.workdir, os.path.relpath(entry, base))

    def pytest_runtest_logreport(self, report):
        outcome, raw = _outcome(report)
        entry = self.tests.setdefault(
            report.nodeid, {"name": report.nodeid, "outcome": "passed", "duration": 0.0}
        )
        entry["duration"] += float(getattr(report, "duration", 0.0) or 0.0) * 1000
        if _RANK[outcome] > _RANK[entry["outcome"]]:
            entry["outcome"] = outcome
            if raw:
                entry["rawStatus"] = raw
            _describe(entry, report)
        elif raw and outcome == entry["outcome"]:
            entry["rawStatus"] = raw

    def pytest_collectreport(self, report):
        if report.failed:
            name = report.nodeid or "(collection)"
            entry = {"name": name, "outcome": "errored", "duration": 0.0}
            entry["rawStatus"] = "error"
            _describe(entry, report)
            self.tests[name] = entry

    def write(self, path, pytest, code):
        """The CTRF document and its signature, each written whole (renamed into place)."""
        tests = []
        summary = {"tests": 0, "passed": 0, "failed": 0, "skipped": 0, "pending": 0, "other": 0}
        for entry in self.tests.values():
            outcome = entry.pop("outcome")
            status = "failed" if outcome == "errored" else outcome
            if outcome == "errored":
                entry["rawStatus"] = "error"
            entry["status"] = status
            summary[status] += 1
            summary["tests"] += 1
            tests.append(entry)
        summary["start"], summary["stop"] = self.start, _now_ms()
        document = {
            "reportFormat": "CTRF",
            "specVersion": "1.0.0",
            "generatedBy": "harbor-verifier pytest_launcher",
            "results": {
                "tool": {"name": "pytest", "version": getattr(pytest, "__version__", "")},
                "summary": summary,
                "tests": tests,
                "extra": {"exitCode": int(code)},
            },
        }
        data = json.dumps(document).encode("utf-8")
        if self.signer is not None:
            mac = self.signer.copy()
            mac.update(data)
            _write(path + ".sig", mac.hexdigest().encode("ascii"))
        _write(path, data)


def _write(path, data):
    """data to a temporary name, then renamed into place."""
    temporary = path + ".tmp"
    with open(temporary, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)


def _outcome(report):
    """(passed, failed, errored or skipped; pytest's own word when it differs)."""
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            return "passed", "xpassed" if xfail else None
        if report.skipped:
            return "skipped", "xfailed" if xfail else None
        return "failed", None
    if report.failed:  # setup or teardown
        return "errored", "error"
    if report.skipped:
        return "skipped", None
    return "passed", None


def _describe(entry, report):
    longrepr = getattr(report, "longrepr", None)
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        entry["message"] = str(longrepr[2])[:_MESSAGE_CHARS]
        return
    text = getattr(report, "longreprtext", "") or ""
    if not text:
        return
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = getattr(crash, "message", None) or text.strip().splitlines()[-1]
    entry["message"] = message[:_MESSAGE_CHARS]
    entry["trace"] = text[-_TRACE_CHARS:]


def _now_ms():
    return int(time.time() * 1000)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
