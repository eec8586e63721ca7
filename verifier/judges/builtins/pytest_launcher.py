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
  the same name), and pytest's assertion-rewrite cache is a fresh dir that is never
  read (the code under test could write it), so a planted `__pycache__/*.pyc`
  (unchecked-hash, or pytest's own) replaces no trusted module. With --pyc, a module's
  code may instead come from the grader's byte code store, looked up by the hash of the
  very source being imported (TrustedCode).
- With `--tests NAME` the trusted tests are not the repo's: $VERIFIER_PROVIDED/NAME
  holds empty stand-ins of them, and their sources come on stdin after the key (read,
  and stdin closed, before any code of the case runs), so nothing of them is left in a
  file for the code under test to read. Their modules (tests, conftests, helpers) are
  compiled from those sources (a path hook for that dir; pytest's _rewrite_test given
  them), linecache holds their lines for tracebacks, no byte code is written, and
  pytest's rootdir and confcutdir are that dir: their ids are relative to it and no
  conftest of the repo is on their way.
- The report (CTRF JSON) is written by this script, outside the case copy, to
  $VERIFIER_RESULTS/<--report>, with its HMAC-SHA256 beside it (<--report>.sig) under a
  key the grader hands over on stdin for this run alone: read, and stdin closed,
  before any code of the case runs. A report the code under test writes itself (and
  then ends the run before this script could write the real one) does not verify.
  Once it is written the process ends at once (no interpreter teardown): nothing the
  case left for the exit (atexit functions, non-daemon threads) runs or holds it.

The code under test runs in this process, so it could rewrite pytest from inside (the
well-known tricks: a trace function that flips each failed report as pluggy hands it
to the hooks, a plugin that turns failures into passes, TestReport or the runner
patched, a test's code swapped, a value equal to anything). Four layers, each set up
before any code of the case runs:

- The audit hook (Audit; sys.addaudithook: nothing removes it). Code of the case (a
  file in the working dir that is not a trusted test, a conftest or a helper beside the
  tests) that installs a trace or profile function (sys.settrace, sys.setprofile,
  threading's, sys.monitoring), reaches frames (sys._current_frames, a traceback's,
  generator's or coroutine's frame) or every live object (gc.get_objects,
  get_referrers, get_referents), uses ctypes or opens a process's memory
  (/proc/self/mem, which writes any object), or sets a function's code, or a trusted
  function's defaults or a trusted object's class, is refused (the call raises) and the
  fact kept; so is any native module loaded from the working dir but those the author
  names (--native). sys._getframe gives code of the case a FrameView (code, line, read
  only globals, only their dunder strings for a trusted frame), never a frame; so is every
  signal handler installed once the case can run (the interpreter hands it the frame
  it interrupted, unaudited). Who did it is the calling frame, past the standard
  functions that only hand things on.
- The run's records (Run) live behind the audit hook: the plugin pytest calls
  (Forwarder) keeps nothing and hands each hook's arguments to it through sys.audit,
  taken only from the Forwarder's own code called under pytest (no code of the case on
  the stack). Nothing the case reaches through pytest's objects (its config is in a
  class attribute) holds an outcome, a fact or the signing key (main() alone does).
- Report states are checked when written: a call that passed must have a body that ran
  and raised nothing; a report's outcome must not change between pytest making it and
  logging it, nor after; a test with no call reported did not pass.
- Integrity pins what the outcomes rest on: the functions (their code, defaults and
  closures), classes and modules of pytest, pluggy, the author's plugins and this
  script, the builtins and the standard modules the report is written with; before the
  first conftest, pluggy's hook callers and implementations; when collection ends,
  each collected test's function and the callables bound in the test modules, and the
  helpers they imported from beside them checked (check_helpers). When each test is
  torn down (what honest tests monkeypatch is restored by then) it checks pytest's
  core, the builtins, the test modules, the hooks and that test; after the run, all of
  it. While the tests are collected, a pinned name newly bound to code of the case is
  a fact (check_collecting), and so is a name a test module imports from outside the
  working dir that is code of the case (check_import). A hook implemented by
  anything but pytest, pluggy, a plugin, a module installed in the toolchain, a
  conftest, a test module, or a module a conftest's or test module's `pytest_plugins`
  names (each defined in the source of a file there before the run), or any pinned
  object that changed, voids the run.

And no name swapped for one call and put back (which no pin compared later sees) is
looked up by the launcher or a test: the launcher runs its code again in a namespace of
its own, with builtins of its own (_private_run), so sys.modules["__main__"] and the
builtins module hold nothing it looks up, and what code of the case can reach of it
(sys._getframe, the signal functions, the asserts' comparison, the Forwarder, the
import hooks) is sealed (_sealed: globals of its own, holding nothing of the
launcher's); each test function pytest calls is called with a copy of its module's
globals and of the builtins made as its call begins (Run.private_test). A pinned name
bound to code of the case while the tests are collected, or when a test's call begins,
is a fact.

A fact of any layer voids the run: no report is written, the facts go to stderr after
TAMPERED_MARK and the exit is TAMPERED, which the grader counts as a failure. And each
`assert` of a test module compares through Assertions: a value of the case that claims
equality (or an ordering) with a decoy too is compared by the other side's rules.
This raises the bar; it is no proof: code written against this very script, standard
or installed modules the tests use rewritten before they use them, and what standard
or installed code hands on to the case remain (docs/builtins.md, "Limits").

What it cannot stop, and the recommended gate's guards must: a `conftest.py` (pytest
imports it as a plugin).

`--probe`: the same imports and pytest arguments in an empty dir, collecting nothing.
Exit 0 when the toolchain can run the tests at all; else PROBE_FAILED, with the reason
on stderr. The grader runs it only when the real run left no usable report, to tell a
fault of the toolchain (an error) from what the case did (a failure).
"""

import _imp
import ast
import base64
import builtins
import contextlib
import functools
import hashlib
import hmac
import importlib
import importlib.machinery
import json
import marshal
import operator
import os
import sys
import tempfile
import time
import types
from _thread import get_ident as _get_ident
from itertools import repeat

_signal = importlib.import_module("_signal")  # what signal.signal calls (no stubs to import)

PROBE_FAILED = 3
TAMPERED = 7  # the code under test tampered with the run: no report is written
TAMPERED_MARK = "pytest_launcher: the run was tampered with: "
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
_ORDER = ("passed", "skipped", "errored", "failed")  # a test's outcome: the worst of its phases
_MESSAGE_CHARS = 1000
_TRACE_CHARS = 8000
_PINNED_PACKAGES = ("pytest", "_pytest", "pluggy")
# What the report is written and signed with, beside this script's own globals.
_WRITER_MODULES = ("json", "json.encoder", "hmac", "hashlib", "_hashlib")
_WRITER_NAMES = {"os": ("replace", "fspath"), "posixpath": ("join",)}
# Builtins that test tools replace on purpose (and this script never calls after the run).
_REPLACEABLE_BUILTINS = ("__import__", "__build_class__", "print", "input", "breakpoint")
_UNPINNED = ("__dict__", "__weakref__", "__doc__", "__annotations__", "_abc_impl")
_FUNCTION = types.FunctionType
_METHOD = types.MethodType
_MODULE = types.ModuleType
_BOUND_BUILTINS = (types.BuiltinMethodType, types.MethodWrapperType)
# A generator's, a coroutine's or an async generator's code: pytest or a plugin runs it.
_NOT_PLAIN = 0x20 | 0x80 | 0x100 | 0x200
_CORE = (
    "_pytest.runner",
    "_pytest.reports",
    "_pytest.python",
    "_pytest.outcomes",
    "_pytest.skipping",
    "_pytest.main",
    "pluggy",
)  # pinned and checked at each test
_MAX_FOUND = 20  # facts of tampering named
_COMPARE_NAME = "@verifier_compare"  # the comparison's name in a rewritten test module
_PRIVATE_MARK = "@verifier_private"  # in a test's private globals: the module's own
# The grader's store of trusted byte code (TrustedCode); the grader names the same files.
PYC_DIR = "pyc"  # provided: <sha256 of a source>/<variant>, the store's entries for the case
PYC_FILL = "pyc-fill.txt"  # provided: `kind<TAB>relative path` lines, to compile now
PYC_ENTRIES = "pyc-entries.json"  # handed back, signed: what was compiled now
PYC_SEEN = "pyc-seen.json"  # handed back: [kind, relative path, variant, sha256] of each looked up
_MAX_SEEN = 2000
_MAX_SOURCE = 16 * 1024 * 1024
_FILL_SECONDS = 2.0  # of compiling for the store in one run, before any code of the case
_PR_SET_DUMPABLE = 4
_audit = sys.audit
_os_exit = os._exit  # taken before the case runs (it may rebind os._exit)
_HANDED = {}  # type: dict[str, bytes]  # path -> a trusted test's source (--tests)
# What the audit hook looks at (besides the Forwarder's events): all else returns at once.
_WATCHED = (
    "import",
    "open",
    "compile",
    "code.__new__",
    "object.__getattr__",
    "object.__setattr__",
    "sys.settrace",
    "sys.setprofile",
    "sys._getframe",
    "sys._current_frames",
    "sys._current_exceptions",
    "sys.monitoring.register_callback",
    "sys.addaudithook",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "ctypes.addressof",
    "ctypes.call_function",
    "ctypes.cdata",
    "ctypes.cdata/buffer",
    "ctypes.create_string_buffer",
    "ctypes.create_unicode_buffer",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.dlsym/handle",
    "ctypes.get_errno",
    "ctypes.get_last_error",
    "ctypes.PyObj_FromPtr",
    "ctypes.set_errno",
    "ctypes.set_exception",
    "ctypes.set_last_error",
    "ctypes.string_at",
    "ctypes.wstring_at",
    "pytest_launcher.of_case",
    "pytest_launcher.getframe",
    "pytest_launcher.signal",
    "pytest_launcher.compare",
    "pytest_launcher.pyc",
)
_FRAME_ATTRIBUTES = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame"))
_REPLACED_ATTRIBUTES = frozenset(
    ("__code__", "__defaults__", "__kwdefaults__", "__class__", "__bases__")
)
_AUDIT_WORDS = {
    "gc.get_objects": "reached every live object (gc.get_objects)",
    "gc.get_referrers": "reached live objects (gc.get_referrers)",
    "gc.get_referents": "reached live objects (gc.get_referents)",
    "sys.monitoring.register_callback": "installed a monitoring callback (sys.monitoring)",
    "sys.addaudithook": "added an audit hook",
}
# Read through type's own descriptors: a metaclass of the case's cannot answer for them.
_type_mro = type.__dict__["__mro__"].__get__
_type_dict = type.__dict__["__dict__"].__get__
_type_flags = type.__dict__["__flags__"].__get__
_type_qualname = type.__dict__["__qualname__"].__get__
_CONTENTS = operator.attrgetter("cell_contents")
_IMPLEMENTED = operator.attrgetter("function")
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement or type()
_MAX_DEPTH = 50  # containers compared element by element, nested
_SCALARS = frozenset((int, float, complex, str, bytes, bool, type(None)))
_SYMBOLS = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.In: "in",
    ast.NotIn: "not in",
}
_ORDERINGS = {  # symbol: (its method, the reflected one, the operator)
    "<": ("__lt__", "__gt__", operator.lt),
    "<=": ("__le__", "__ge__", operator.le),
    ">": ("__gt__", "__lt__", operator.gt),
    ">=": ("__ge__", "__le__", operator.ge),
}
_RELATIONS = {
    "==": operator.eq,
    "!=": lambda value, decoy: not operator.ne(value, decoy),  # claims equality
    **{symbol: relation for symbol, (_, _, relation) in _ORDERINGS.items()},
}
_MIRRORED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_LEAST = {int: -(10**100), float: float("-inf"), str: "", bytes: b"", tuple: (), list: []}
_GREATEST = {int: 10**100, float: float("inf")}
_PLAIN = {  # a builtin base: its value of an instance of a subclass, by its own methods
    int: int.__int__,
    float: float.__float__,
    complex: lambda value: complex(
        complex.__dict__["real"].__get__(value), complex.__dict__["imag"].__get__(value)
    ),
    str: str.__str__,
    bytes: lambda value: bytes.__getitem__(value, slice(None)),
    tuple: lambda value: tuple.__getitem__(value, slice(None)),
    list: lambda value: list.__getitem__(value, slice(None)),
    dict: dict.copy,
    set: set.copy,
    frozenset: frozenset.copy,
}
# Values that compare equal to much by design: (module, class, the name a test uses).
_MATCHERS = (
    ("unittest.mock", "_ANY", "ANY"),
    ("unittest.mock", "NonCallableMock", "Mock"),
    ("_pytest.python_api", "ApproxBase", "approx"),
    ("_pytest.approx", "ApproxBase", "approx"),
)


def _sealed(function, names=None):
    """A copy of function whose globals are its own: `names` (what its code looks up of
    this script's globals, each itself sealed) and a copy of the builtins of its own.
    What code of the case can reach (sys._getframe, the signal functions, the
    comparison of the tests' asserts, the plugin pytest calls, the import hooks) is
    sealed so: its __globals__ and __builtins__ hold nothing the launcher looks up."""
    namespace = dict(names or {})
    namespace["__builtins__"] = dict(vars(builtins))
    copy = _FUNCTION(
        function.__code__,
        namespace,
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    if function.__kwdefaults__ is not None:
        copy.__kwdefaults__ = dict(function.__kwdefaults__)
    vars(copy).update(vars(function))
    copy.__qualname__ = function.__qualname__
    return copy


def _seal_class(kind, names=None):
    """Each function of a class sealed (see _sealed)."""
    for name, value in list(vars(kind).items()):
        if type(value) is _FUNCTION:
            setattr(kind, name, _sealed(value, names))
    return kind


def main(argv):
    options, pytest_args = _parse(argv)
    signer, sources = _take_input(bool(options["tests"]))
    workdir = os.getcwd()
    if options["probe"]:
        return _probe(workdir, options, pytest_args)
    tests_root = _tests_root(options["tests"])
    if tests_root is not None:
        sources = _install_sources(tests_root, sources)
        pytest_args = _under_tests_root(pytest_args, tests_root)
    found = []  # facts of tampering: behind the audit hook, as is all of the run's state
    provenance = Provenance(workdir, conftests=tests_root is None)
    run = Run(workdir, bool(options["ini"]), provenance, found)
    audit = Audit(provenance, tuple(options["native"]), found, sys._getframe(), run)
    _close_own_memory()
    sys.addaudithook(audit.hook())  # first, before anything of the case: it stays
    _isolate(workdir)
    if tests_root is not None:
        sys.path_hooks.insert(0, _stored_hook(tests_root, sources))
    try:
        pytest = _import_trusted()
        plugins = [importlib.import_module(name) for name in options["plugins"]]
    except Exception as error:  # the toolchain cannot run pytest: no case is involved yet
        sys.stderr.write(f"the toolchain cannot import pytest or its plugins: {error!r}\n")
        return PROBE_FAILED
    sys._getframe = _getframe
    _signal.signal, _signal.getsignal, _imp.create_builtin = _signals()
    pytest_args = _fresh_rewrite_cache(pytest_args, sources)
    for path in _given_paths(pytest_args, workdir):
        provenance.trust_tests(path)
    run.assertions = _strict_assertions(Assertions())
    results = os.environ["VERIFIER_RESULTS"]
    if options["pyc"]:  # before any code of the case: what it compiles now is trusted
        run.code = TrustedCode(workdir, _provided(), pytest, plugins)
        entries = run.code.fill()
        if entries and signer is not None:
            mac = signer.copy()
            mac.update(entries)
            _write(os.path.join(results, PYC_ENTRIES + ".sig"), mac.hexdigest().encode())
            _write(os.path.join(results, PYC_ENTRIES), entries)
    forwarder = _forwarder(pytest)
    run.pyfunc = vars(sys.modules["_pytest.python"]).get("pytest_pyfunc_call")
    run.integrity = Integrity(
        workdir, plugins, found, audit.touched, provenance, tests_root=tests_root, code=run.code
    )
    report = os.path.join(results, options["report"])
    # Taken before the case runs: what it may rebind later is checked, never called.
    finish, document, say, write = run.finish, run.document, os.write, _write
    own = (finish.__func__.__code__, document.__func__.__code__)
    sys.meta_path.append(_CaseRoot(workdir))
    fixed = _fixed(workdir, options, tests_root)
    code = pytest.main([*fixed, *pytest_args], plugins=[forwarder, *plugins])
    finish()
    if run.code is not None:  # a hint of what to compile next time: it can only cost time
        with contextlib.suppress(Exception):
            write(os.path.join(results, PYC_SEEN), run.code.seen_document())
    if finish.__func__.__code__ is not own[0] or document.__func__.__code__ is not own[1]:
        found.append("the launcher's own checks were rewritten")
    if found:  # nothing the case could have rebound writes it: the facts go to stderr
        say(2, ("\n" + TAMPERED_MARK + "; ".join(found[:_MAX_FOUND]) + "\n").encode())
        return TAMPERED
    data = document(pytest, code)
    if signer is not None:
        mac = signer.copy()
        mac.update(data)
        write(report + ".sig", mac.hexdigest().encode("ascii"))
    write(report, data)
    return int(code)


def _probe(workdir, options, pytest_args):
    """The same imports and arguments in an empty dir, collecting nothing. No testpaths:
    in an empty dir they match nothing, and pytest warns of that (an error under the
    ini's `filterwarnings = error`)."""
    _isolate(workdir)
    try:
        pytest = _import_trusted()
        plugins = [importlib.import_module(name) for name in options["plugins"]]
    except Exception as error:
        sys.stderr.write(f"the toolchain cannot import pytest or its plugins: {error!r}\n")
        return PROBE_FAILED
    probe = [*_fixed(workdir, options), "--collect-only", "-o", "testpaths=", *pytest_args]
    code = pytest.main(probe, plugins=plugins)
    if int(code) in (0, 5):  # 5: no tests collected, as in an empty dir
        return 0
    sys.stderr.write(f"pytest refused to run with these arguments (exit {int(code)})\n")
    return PROBE_FAILED


def _provided():
    """The dir of the trusted files the grader handed over (this script's)."""
    return os.path.dirname(os.path.abspath(__file__))


def _fixed(workdir, options, tests_root=None):
    """pytest's fixed arguments: the trusted ini (or none), and the root of the node ids
    and of the conftests it loads: the working dir, or the trusted tests' own dir when
    they are handed over (--tests): then their ids are relative to it, as when pytest
    runs them where they are, and no conftest of the case is on their way."""
    ini = os.path.join(_provided(), options["ini"])
    root = workdir if tests_root is None else tests_root
    return [
        "-c",
        ini if options["ini"] else os.devnull,
        "--rootdir",
        root,
        "--confcutdir",
        root,
        "--import-mode=append",
        "-p",
        "no:cacheprovider",
        "--color=no",
    ]


def _given_paths(pytest_args, workdir):
    """The files and dirs among pytest's arguments (a node id's file): the tests."""
    paths = []
    for argument in pytest_args:
        if argument.startswith("-"):
            continue
        path = os.path.join(workdir, argument.split("::", 1)[0])
        if _within(path, workdir) and os.path.exists(path):
            paths.append(path)
    return paths


def _take_input(framed):
    """(an HMAC of the key the grader writes on stdin, or None when there is none; the
    trusted tests' sources it writes after the key, with --tests) read to its end; stdin
    is /dev/null from then on, so nothing run later can read it. Framed input is the key,
    then each file's relative name and bytes, every part after its length (4 bytes, big
    endian); what does not frame so is no source at all."""
    chunks = []
    while True:
        try:
            chunk = os.read(0, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    data = b"".join(chunks)
    sources = {}
    if framed:
        parts, at = [], 0
        while at + 4 <= len(data):
            size = int.from_bytes(data[at : at + 4], "big")
            parts.append(data[at + 4 : at + 4 + size])
            at += 4 + size
        key = parts[0] if parts else b""
        for index in range(1, len(parts) - 1, 2):
            sources[parts[index].decode("utf-8", "surrogateescape")] = parts[index + 1]
    else:
        key = data
    return (hmac.new(key, digestmod=hashlib.sha256) if key else None), sources


def _tests_root(name):
    """The dir of the trusted tests handed over (--tests NAME: $VERIFIER_PROVIDED/NAME),
    or None."""
    if not name:
        return None
    return os.path.abspath(os.path.join(os.environ["VERIFIER_PROVIDED"], name))


def _install_sources(tests_root, sources):
    """The trusted tests' sources, which the grader hands over on stdin (their files in
    $VERIFIER_PROVIDED are empty stand-ins, so that nothing of them is there for the code
    under test to read): by absolute path, in linecache for tracebacks (an entry without
    a time is never checked against the empty file), and no byte code written anywhere
    (pytest's rewritten tests would be in it)."""
    import linecache

    stored = {}
    for name, data in sources.items():
        path = os.path.join(tests_root, name)
        if not _within(path, tests_root) or not name.endswith(".py"):
            continue
        stored[path] = data
        text = data.decode("utf-8", "replace")
        lines = text.splitlines(True)
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        linecache.cache[path] = (len(data), None, lines, path)
    sys.dont_write_bytecode = True
    _HANDED.update(stored)
    return stored


def _under_tests_root(pytest_args, tests_root):
    """pytest's arguments with the trusted tests' paths (relative to their dir, as the
    author lists them) made absolute under it; others as they are."""
    moved = []
    for argument in pytest_args:
        path = os.path.join(tests_root, argument.split("::", 1)[0])
        under = not argument.startswith("-") and _within(path, tests_root)
        moved.append(
            os.path.join(tests_root, argument) if under and os.path.exists(path) else argument
        )
    return moved


def _parse(argv):
    """--report NAME, --ini NAME, --tests NAME, --plugin MODULE (repeated), --native GLOB
    (repeated), --probe, --pyc (the grader's byte code store: see TrustedCode), then `--`
    and pytest's own arguments."""
    options = {
        "report": "ctrf.json",
        "ini": "",
        "tests": "",
        "plugins": [],
        "native": [],
        "probe": False,
        "pyc": False,
    }
    rest = list(argv)
    while rest:
        item = rest.pop(0)
        if item == "--":
            break
        if item in ("--probe", "--pyc"):
            options[item[2:]] = True
        elif item in ("--report", "--ini", "--tests", "--plugin", "--native") and rest:
            value = rest.pop(0)
            if item == "--plugin":
                options["plugins"].append(value)
            elif item == "--native":
                options["native"].append(value)
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
        source = self.get_data(path)
        answer = []  # the trusted compile of this very source, when the store has one
        _audit("pytest_launcher.pyc", path, source, "plain", answer)
        return answer[0] if answer else self.source_to_code(source, path)


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

    return _sealed(hook, {"os": os, "_within": _sealed(_within, {"os": os})})


class _StoredLoader(importlib.machinery.SourceFileLoader):
    """A trusted test module (or helper, or conftest) compiled from the source the grader
    handed over, never from its file (an empty stand-in)."""

    def __init__(self, fullname, path, sources):
        super().__init__(fullname, path)
        self.sources = sources

    def get_data(self, path):
        data = self.sources.get(path)
        return super().get_data(path) if data is None else data

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


class _StoredFinder:
    """The finder of a dir of the trusted tests: the modules among their sources."""

    def __init__(self, path, sources):
        self.path = path
        self.sources = sources

    def find_spec(self, fullname, target=None):
        import importlib.util

        base = os.path.join(self.path, fullname.rpartition(".")[2])
        for path, search in ((os.path.join(base, "__init__.py"), [base]), (base + ".py", None)):
            if path in self.sources:
                loader = _StoredLoader(fullname, path, self.sources)
                return importlib.util.spec_from_file_location(
                    fullname, path, loader=loader, submodule_search_locations=search
                )
        return None

    def invalidate_caches(self):
        pass


def _stored_hook(tests_root, sources):
    def hook(path):
        path = os.path.abspath(path or os.getcwd())
        if not _within(path, tests_root):
            raise ImportError("not a dir of the trusted tests")
        return _StoredFinder(path, sources)

    names = {"os": os, "_within": _sealed(_within, {"os": os}), "_StoredFinder": _StoredFinder}
    return _sealed(hook, names)


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


_seal_class(_CaseRoot, {"importlib": importlib})
_seal_class(_SourceOnlyLoader, {"_audit": _audit})
_seal_class(_StoredLoader)
_seal_class(_StoredFinder, {"os": os, "_StoredLoader": _StoredLoader})


def _fresh_rewrite_cache(pytest_args, sources=None):
    """pytest's rewritten test modules are cached beside them; read them from a fresh dir
    (pytest before 6: no rewriting at all, it has no way to move its cache). With the
    trusted tests' sources handed over, none is cached at all (a pyc of a test would
    hold it), the cache is a path that cannot exist (nothing planted there is read), and
    they are rewritten from those sources."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return pytest_args
    if not hasattr(rewrite, "get_cache_dir"):
        return ["--assert=plain", *pytest_args]
    from pathlib import Path

    if hasattr(rewrite, "_read_pyc"):
        # never a .pyc the case's code could have written
        source = _sealed(_source, {"_HANDED": _HANDED})
        rewrite._read_pyc = _sealed(_rewritten_pyc, {"os": os, "_audit": _audit, "_source": source})
    if sources:
        nowhere = Path(os.devnull) / "pytest-rewrite"  # beneath a device: no dir is there
        rewrite.get_cache_dir = _sealed(lambda _file_path: nowhere)
        rewrite._rewrite_test = _sealed(_stored_rewrite(rewrite, sources), {"ast": ast, "os": os})
        return pytest_args
    cache = Path(tempfile.mkdtemp(prefix="pytest-rewrite-"))
    rewrite.get_cache_dir = _sealed(lambda file_path: cache.joinpath(*file_path.parts[1:-1]))
    return pytest_args


def _rewritten_pyc(source, pyc, trace=None):  # noqa: ARG001 (pytest's _read_pyc's signature)
    """pytest's read of a rewritten test module's cached code: the store's trusted compile
    of the source as it is now (TrustedCode), never a file of pytest's cache, which lies
    where the code under test may write (a None has pytest rewrite it)."""
    try:
        path = os.fspath(source)
        data = _source(path)  # a trusted test handed over: its source, not its stand-in
    except (OSError, TypeError):
        return None
    answer = []
    _audit("pytest_launcher.pyc", path, data, "test", answer)
    return answer[0] if answer else None


def _stored_rewrite(rewrite, sources):
    """pytest's _rewrite_test, for a trusted test handed over: its asserts rewritten from
    the source the grader gave, not read from its file. (Its first value, the source's
    hash or stat, only keys a cached pyc: none is written.)"""
    original = rewrite._rewrite_test

    def _rewrite_test(fn, config, *more):
        strfn = str(fn)
        source = sources.get(strfn)
        if source is None:
            return original(fn, config, *more)
        tree = ast.parse(source, filename=strfn)
        rewrite.rewrite_asserts(tree, source, strfn, config)
        code = compile(tree, strfn, "exec", dont_inherit=True)
        return os.stat(strfn), code

    return _rewrite_test


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


class Provenance:
    """Whose code a file holds: the case's (in the working dir), or trusted: the test
    files pytest collects (or is given) and what lies beside and beneath them (unless
    that is the root: tests inside a package of the code trust that package's tests dir,
    not the package), conftest.py files (but with --tests), and outside the working dir
    what lies beneath the toolchain's import path and this script's dir."""

    def __init__(self, workdir, conftests=True):
        self.workdir = workdir
        self.prefix = workdir.rstrip(os.sep) + os.sep
        self.test_files = set()
        self.test_dirs = []  # prefixes, each ending with os.sep
        self.conftests = conftests  # False with --tests: no conftest of the case is loaded
        # Trusted outside the working dir: the toolchain's import path and this script's
        # dir, as they are before the case runs (its TMPDIR and HOME are not among them).
        roots = [*sys.path, os.path.dirname(os.path.abspath(__file__))]
        self.roots = tuple(
            os.path.join(os.path.normpath(root), "")
            for root in roots
            if os.path.isabs(root) and root != os.sep and not _within(root, workdir)
        )

    def trust_tests(self, path):
        """A test file of the run (given, or collected as a test module): it, and its dir
        with what is beneath it (its helpers), unless that is the root. A dir given as a
        path is trusted through the test modules collected in it (it may hold the code)."""
        path = os.path.abspath(path)
        if not os.path.isfile(path):
            return
        self.test_files.add(path)
        directory = os.path.dirname(path)
        if directory != self.workdir and _within(directory, self.workdir):
            prefix = directory.rstrip(os.sep) + os.sep
            if prefix not in self.test_dirs:
                self.test_dirs.append(prefix)

    def of_case(self, filename):
        """A code object's filename (or a module's file) is the case's. A name that is not
        a path (None, relative), or one not normalized, counts as the case's: only the
        case adds such entries; so does a file outside the working dir and the trusted
        roots (its TMPDIR, HOME, a world-writable dir)."""
        if type(filename) is not str or not filename.startswith(os.sep):
            return True
        if filename.startswith("//") or os.path.normpath(filename) != filename:
            return True  # a path spelled to miss the prefixes
        if not filename.startswith(self.prefix):
            return not filename.startswith(self.roots)
        if filename in self.test_files:
            return False
        if self.conftests and filename.endswith(os.sep + "conftest.py"):
            return False
        return not any(filename.startswith(prefix) for prefix in self.test_dirs)


def _pseudo(filename):
    """A code object's filename that names no file: compiled from a string, frozen."""
    return type(filename) is str and filename.startswith("<")


class FrameView:
    """What code of the case gets from sys._getframe (and inspect.currentframe): a
    frame's code, line and module globals (read only), and a view of its caller; never
    the frame itself (its locals, their objects, its trace). Of a frame of trusted code
    (a test, pytest, the launcher) the globals are its dunder strings alone (its __name__,
    __file__): its functions would hand their own, writable, __globals__ on. No method
    of its own: nothing of it leads back to the launcher's globals."""

    __slots__ = ("f_back", "f_builtins", "f_code", "f_globals", "f_lasti", "f_lineno")


def _view(frame, of_case):
    """The FrameView of frame (and of its callers); of_case tells whose code a file is."""
    chain = []
    while frame is not None:
        chain.append(frame)
        frame = frame.f_back
    view = None
    strings = {}  # id(globals) -> their strings, for the trusted frames of this chain
    for frame in reversed(chain):
        made = FrameView()
        made.f_back = view
        made.f_builtins = types.MappingProxyType(frame.f_builtins)
        code = made.f_code = frame.f_code
        namespace = frame.f_globals
        if not of_case(code.co_filename) or _pseudo(code.co_filename):
            if id(namespace) not in strings:
                strings[id(namespace)] = {
                    name: value
                    for name, value in namespace.items()
                    if type(value) is str and name.startswith("__")
                }
            namespace = strings[id(namespace)]
        made.f_globals = types.MappingProxyType(namespace)
        made.f_lasti = frame.f_lasti
        made.f_lineno = frame.f_lineno
        view = made
    return view


def _signals():
    """_signal.signal and getsignal (which signal.signal and getsignal call), and
    _imp.create_builtin, while the case can run: the audit hook answers, holding the
    originals (nothing the case reaches does): a signal handler is handed a FrameView
    of the frame it interrupted, never the frame (from which main()'s locals are
    reached), and no second _signal or _imp module (which would hold the originals) is
    made. Each is sealed, and what it calls is a default (replacing a trusted
    function's defaults is refused)."""

    def signal(signalnum, handler, _audit=_audit):
        answer = []
        _audit("pytest_launcher.signal", "signal", (signalnum, handler), answer)
        return answer[0]

    def getsignal(signalnum, _audit=_audit):
        answer = []
        _audit("pytest_launcher.signal", "getsignal", (signalnum,), answer)
        return answer[0]

    def create_builtin(spec, _audit=_audit):
        answer = []
        _audit("pytest_launcher.signal", "create_builtin", (spec,), answer)
        return answer[0]

    return _sealed(signal), _sealed(getsignal), _sealed(create_builtin)


def _getframe(depth=0, _audit=_audit, _index=operator.index, _error=ValueError):
    """sys._getframe while the case can run: the frame for trusted code, a FrameView for
    code of the case (the audit hook answers; it refuses the real one to the case).
    Sealed (see _sealed): it looks up nothing but its defaults."""
    depth = _index(depth)
    answer = []
    _audit("pytest_launcher.getframe", depth, answer)
    if not answer or answer[0] is None:
        raise _error("call stack is not deep enough")
    return answer[0]


_getframe = _sealed(_getframe)


def _compare(symbol, left, right, _audit=_audit):
    """What pytest's rewritten `assert` of a test module calls (as `@verifier_compare`,
    a global of the module its import binds): the audit hook answers through
    Assertions, which nothing the case reaches holds. Sealed (see _sealed)."""
    answer = []
    _audit("pytest_launcher.compare", symbol, left, right, answer)
    return answer[0]


_compare = _sealed(_compare)


def _signal_keeper(of_case):
    """What _signals asks the audit hook, with the originals it alone holds. Every
    handler installed while the case can run is handed a view: whose code it finally
    calls is not to be told (functools.singledispatch, lru_cache hand the frame on)."""
    install, current, create = _signal.signal, _signal.getsignal, _imp.create_builtin
    view = _view
    handed = {}  # id(wrapper) -> (wrapper, the case's handler)

    def unwrapped(handler):
        entry = handed.get(id(handler))
        return entry[1] if entry is not None and entry[0] is handler else handler

    def keeper(what, *arguments):
        if what == "getsignal":
            return unwrapped(current(*arguments))
        if what == "create_builtin":
            name = getattr(arguments[0], "name", None)
            if name in ("_signal", "_imp"):  # a fresh one holds the original functions
                raise ImportError(f"pytest_launcher: refused: a second {name} module")
            return create(*arguments)
        signalnum, handler = arguments
        if callable(handler):
            inner = handler

            def handler(number, frame):
                return inner(number, view(frame, of_case))

            handed[id(handler)] = (handler, inner)
        return unwrapped(install(signalnum, handler))

    return keeper


class Audit:
    """The audit hook (sys.addaudithook: no code can remove it), installed before
    anything of the case can run. Code of the case that installs a trace or profile
    function, reaches a frame or every live object, loads ctypes, replaces a function's
    code, or loads a native module from the working dir (unless the author allows it)
    is refused (the call raises) and the fact kept: the run is void.

    Who did it is the frame that called the audited function, past the standard
    library's functions that only hand frames or tracers on (inspect.currentframe,
    traceback.walk_tb, threading.settrace_all_threads, bdb, ctypes, the import system)
    and past code that names no file (compiled from a string): standard or installed
    code doing these things for honest code (logging, namedtuple, typing, pytest's own
    tracebacks) is not the case's."""

    def __init__(self, provenance, native, facts, main, run):
        self.provenance = provenance
        self.native = native  # the repo's files and dirs whose native modules may load
        self.facts = facts
        self.main = main  # the launcher's main(): pytest's calls of the Forwarder are under it
        self.run = run
        self.touched = {}  # id -> each function whose code or defaults were set since
        self.known = {}  # id -> a code object found not to be the case's (accept)
        self.chain = ([], {})  # the frames of the last stack accept found clean, and each's index
        stdlib = os.path.dirname(os.__file__) + os.sep

        def files(*names):
            return frozenset(stdlib + name for name in names)

        self.trace_files = files(
            "threading.py", "bdb.py", "pdb.py", "trace.py", "cProfile.py", "profile.py"
        )
        self.import_files = files("importlib" + os.sep + "__init__.py")
        # Loaders that compile the file they read, under its own name (pytest's rewriting
        # is known by its trusted file's name: it is not imported yet).
        self.loader_files = frozenset([os.path.abspath(__file__), *self.import_files])
        self.rewrite_file = os.sep + os.path.join("_pytest", "assertion", "rewrite.py")
        self.ctypes_dir = stdlib + "ctypes" + os.sep
        inspect, traceback = stdlib + "inspect.py", stdlib + "traceback.py"
        logging = stdlib + "logging" + os.sep + "__init__.py"
        # Functions that hand the frames they reach to their caller.
        self.frame_functions = frozenset(
            [
                (inspect, "currentframe"),
                (inspect, "stack"),
                (inspect, "trace"),
                (inspect, "getinnerframes"),
                (traceback, "walk_stack"),
                (traceback, "walk_tb"),
                (logging, "<lambda>"),  # logging.currentframe
            ]
        )

    def hook(self):
        """The hook function: a closure over this object and what it calls, so that
        nothing the case can reach from a module rebinds them."""
        watched = _AUDITED
        frame_attributes, replaced_attributes = _FRAME_ATTRIBUTES, _REPLACED_ATTRIBUTES
        judge, accept, run, frame_for = self.judge, self.accept, self.run, self.frame_for
        of_case = self.provenance.of_case
        trusted_code = run.trusted_code
        loaders = (_SourceOnlyLoader.get_code.__code__, _rewritten_pyc.__code__)
        forwarded = dict(_FORWARDED)
        unchecked = _UNCHECKED
        handlers = {event: getattr(run, event.split(".", 1)[1]) for event in forwarded}
        facts = self.facts
        busy = set()
        get_ident = _get_ident
        getframe = sys._getframe
        signals = _signal_keeper(of_case)
        compare = self.compare

        def audit(event, args):
            if event not in watched:
                return
            if event == "object.__getattr__":  # reading __code__ and the like: often
                if args[1] not in frame_attributes:
                    return
            elif event == "object.__setattr__":
                if args[1] not in replaced_attributes:
                    return
            elif event == "import":  # a native module has a file; ctypes is by name
                if args[1] is None and args[0] not in ("ctypes", "_ctypes"):
                    return
            elif event == "open":  # every file opened: only a process's memory matters
                if not _names_process_memory(args[0]):
                    return
            elif event == "pytest_launcher.signal":  # _signals asks (what, arguments, answer)
                args[2].append(signals(args[0], *args[1]))
                return
            elif event == "pytest_launcher.compare":  # _compare asks (symbol, l, r, answer)
                args[3].append(compare(args[0], args[1], args[2], getframe(1).f_back))
                return
            elif event == "pytest_launcher.of_case":  # Assertions asks (filename, answer)
                args[1].append(of_case(args[0]))
                return
            elif event == "pytest_launcher.pyc":  # a loader asks (path, source, kind, answer)
                code = trusted_code(*args[:3], getframe(1).f_code in loaders)
                if code is not None:
                    args[3].append(code)
                return
            elif event in unchecked:  # what these say can only lower the outcomes
                try:
                    handlers[event](*args)
                except Exception as error:
                    fact = f"the launcher could not record {event}: {error!r}"[:500]
                    if len(facts) < _MAX_FOUND and fact not in facts:
                        facts.append(fact)
                return
            ident = get_ident()
            if ident in busy:  # an event of the hook's own making
                return
            busy.add(ident)
            try:
                if event == "pytest_launcher.getframe":  # _getframe asks (depth, answer)
                    args[1].append(frame_for(args[0], getframe(1)))
                    return
                if event in forwarded:
                    fact = accept(event, forwarded[event], getframe(1))
                else:
                    fact = judge(event, args, getframe(1))
            finally:
                busy.discard(ident)
            if fact is None and event in forwarded:
                try:  # outside `busy`: what code of the case does in there is audited
                    handlers[event](*args)
                except Exception as error:
                    fact = f"the launcher could not record {event}: {error!r}"[:500]
                else:
                    return
            if fact is not None:
                if len(facts) < _MAX_FOUND and fact not in facts:
                    facts.append(fact)
                if event in forwarded:
                    return  # not taken; the run is void
                raise (ImportError if event == "import" else RuntimeError)(
                    "pytest_launcher: refused: " + fact
                )

        return audit

    def frame_for(self, depth, frame):
        """sys._getframe(depth) for whoever asked (through _getframe, or sys.audit
        itself): the frame, or for code of the case a FrameView of it; None when the
        stack is not that deep."""
        asker = frame.f_back if frame.f_code is _getframe.__code__ else frame
        target = asker
        for _ in range(depth if type(depth) is int else 0):
            target = target.f_back if target is not None else None
        if target is None:
            return None
        culprit = self.culprit(asker, skip_functions=self.frame_functions)
        if culprit is not None and self.provenance.of_case(culprit.f_code.co_filename):
            return _view(target, self.provenance.of_case)
        return target

    def compare(self, symbol, left, right, caller):
        """An assert's comparison (see _compare), as Assertions decides it for the
        file of its caller."""
        filename = caller.f_code.co_filename if caller is not None else None
        return self.run.assertions.compare(symbol, left, right, filename)

    def accept(self, event, code, frame):
        """None when pytest called the Forwarder: the event comes from its function for
        it, and every frame between it and main() names a file that is not the case's."""
        if frame is None or frame.f_code is not code:
            return f"an event of the launcher's records was forged ({event})"
        frame = frame.f_back
        known, (chain, depths), walked = self.known, self.chain, []
        while frame is not None and frame is not self.main:
            at = depths.get(frame)  # a frame of the last stack found clean (hashed by identity)
            if at is not None and _still_linked(chain, at, self.main):
                walked += chain[at:]  # it and its callers up to main(): the same frames
                break
            code = frame.f_code
            if known.get(id(code)) is not code:
                filename = code.co_filename
                if self.provenance.of_case(filename) and not filename.startswith("<frozen "):
                    culprit = _short(self, filename) if type(filename) is str else "the case"
                    return f"{culprit} called pytest's hooks itself ({event})"
                known[id(code)] = code  # trusted code stays trusted
            walked.append(frame)
            frame = frame.f_back
        if frame is None:
            return f"pytest's hooks were called outside its run ({event})"
        self.chain = (walked, {frame: index for index, frame in enumerate(walked)})
        return None

    def judge(self, event, args, frame):
        """The fact of tampering this event is, or None."""
        if event == "import":
            return self.judge_import(args, frame)
        if event == "object.__getattr__":
            if args[1] not in _FRAME_ATTRIBUTES:
                return None
            culprit = self.culprit(frame, skip_files=(), skip_functions=self.frame_functions)
            return self.fact(culprit, f"reached a frame ({args[1]})")
        if event == "object.__setattr__":
            return self.judge_setattr(args, frame)
        if event == "compile":
            return self.judge_compile(args[1], frame)
        if event == "code.__new__":  # made or replaced by the case itself (types.coroutine
            # replaces the flags of the standard library's own functions)
            culprit = frame if frame is not None and not _pseudo(frame.f_code.co_filename) else None
            return self.judge_compile(args[1], culprit, walk=False)
        if event == "open":
            return self.fact(self.culprit(frame), f"opened a process's memory ({args[0]!r})")
        if event in ("sys.settrace", "sys.setprofile"):
            culprit = self.culprit(frame, skip_files=self.trace_files)
            if culprit is None:  # a new thread starts with what threading.settrace was given
                return self.judge_thread_hook(event)
            return self.fact(culprit, f"installed a trace or profile function ({event})")
        if event.startswith("ctypes."):
            culprit = self.culprit(frame, skip_dir=self.ctypes_dir)
            return self.fact(culprit, f"used ctypes ({event})")
        if event in ("sys._getframe", "sys._current_frames", "sys._current_exceptions"):
            culprit = self.culprit(frame, skip_functions=self.frame_functions)
            return self.fact(culprit, f"reached a frame ({event})")
        culprit = self.culprit(frame)
        return self.fact(culprit, _AUDIT_WORDS.get(event, event))

    def judge_compile(self, filename, frame, walk=True):
        """Code compiled (or a code object made) under the name of a trusted file while
        code of the case is on the stack, other than by a loader compiling the file it
        read (the import system, pytest's assertion rewriting, this launcher): a disguise,
        which the provenance checks would take for trusted code."""
        filename = os.fsdecode(filename) if isinstance(filename, (str, bytes)) else filename
        if type(filename) is not str or _pseudo(filename) or self.provenance.of_case(filename):
            return None
        caller = frame.f_code.co_filename if frame is not None else None
        if type(caller) is str and (
            caller in self.loader_files
            or caller.startswith("<frozen ")
            or (caller.endswith(self.rewrite_file) and not self.provenance.of_case(caller))
        ):
            return None
        while frame is not None:
            code_file = frame.f_code.co_filename
            if not _pseudo(code_file) and self.provenance.of_case(code_file):
                where = f"{_short(self, code_file)}:{frame.f_lineno}"
                return f"{where} compiled code under a trusted file's name ({filename[:200]!r})"
            frame = frame.f_back if walk else None
        return None

    def judge_thread_hook(self, event):
        threading = sys.modules.get("threading")
        if type(threading) is not _MODULE:
            return None
        name = "_trace_hook" if event == "sys.settrace" else "_profile_hook"
        filename = _callable_file(vars(threading).get(name))
        if filename is None or not self.provenance.of_case(filename):
            return None
        return f"{_short(self, filename)} installed a trace or profile function ({event}, threads)"

    def judge_import(self, args, frame):
        name, filename = args[0], args[1]
        if type(filename) is str and _within(filename, self.provenance.workdir):
            workdir = self.provenance.workdir
            relative = os.path.relpath(filename, workdir)
            if not any(_within(filename, os.path.join(workdir, path)) for path in self.native):
                return (
                    f"the native module {relative} of the repo was loaded (an author "
                    "whose repo holds extension modules built in place names them in "
                    "`native_modules`)"
                )
            return None
        if name in ("ctypes", "_ctypes"):
            culprit = self.culprit(frame, skip_dir=self.ctypes_dir)
            return self.fact(culprit, "imported ctypes")
        return None

    def judge_setattr(self, args, frame):
        target, name = args[0], args[1]
        if name in ("__code__", "__defaults__", "__kwdefaults__") and type(target) is _FUNCTION:
            self.touched[id(target)] = target  # by anyone: the pins compare these alone
        if name == "__code__":
            return self.fact(self.culprit(frame), "replaced a function's code (__code__)")
        if name in ("__defaults__", "__kwdefaults__") and type(target) is _FUNCTION:
            if self.provenance.of_case(target.__code__.co_filename):
                return None
            return self.fact(self.culprit(frame), f"changed a trusted function's {name}")
        if name in ("__class__", "__bases__"):
            owner = target if name == "__bases__" else type(target)
            if _class_of_case(self.provenance, owner):
                return None
            return self.fact(self.culprit(frame), f"changed the {name} of a trusted object")
        return None

    def culprit(self, frame, skip_files=(), skip_functions=(), skip_dir=None):
        """The first frame from `frame` outwards that is not the import system's, not a
        function that only hands things on (skipped), and names a file: None when there
        is none."""
        while frame is not None:
            code = frame.f_code
            filename = code.co_filename
            if type(filename) is not str:
                return frame
            skip = (
                _pseudo(filename)
                or filename in self.import_files
                or filename in skip_files
                or (skip_dir is not None and filename.startswith(skip_dir))
                or (filename, code.co_name) in skip_functions
            )
            if not skip:
                return frame
            frame = frame.f_back
        return None

    def fact(self, culprit, what):
        if culprit is None:
            return None
        filename = culprit.f_code.co_filename
        if not self.provenance.of_case(filename):
            return None
        return f"{_short(self, filename)}:{culprit.f_lineno} {what}"


def _still_linked(chain, at, main):
    """Whether the frames of `chain` (in order, from a frame to the one main() called)
    from `at` on still call each other and main() the last: a generator's frame, once
    resumed by another caller, has another f_back (reading f_back is not audited, unlike
    f_code and id())."""
    for index in range(at, len(chain)):
        caller = chain[index + 1] if index + 1 < len(chain) else main
        if chain[index].f_back is not caller:
            return False
    return True


def _close_own_memory():
    """This process made not dumpable (prctl PR_SET_DUMPABLE 0), before any code of the
    case runs: its /proc/<pid>/mem and ptrace are closed to every process of its UID,
    those the code under test starts included (which the audit hook cannot see; its own
    opening of /proc/self/mem the hook refuses). Exec makes a child dumpable again, so
    only this process is concerned. ctypes leaves sys.modules again, so that the case
    importing it is still seen; a toolchain without ctypes goes on as it is (Landlock's
    write rules close /proc/<pid>/mem where it runs)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] in ("ctypes", "_ctypes")]:
            del sys.modules[name]


def _names_process_memory(path):
    """Whether an opened path may be a process's memory file (/proc/self/mem, through
    any link or dir it is opened from), which writes anything, the launcher included: a
    path whose last part is `mem`, in /proc once resolved, or relative and not a file
    of the working dir (opened from a dir descriptor the event does not name)."""
    if type(path) is int:
        return False  # a descriptor already open: its opening was seen
    try:
        path = os.fsdecode(path)
    except TypeError:
        return False
    if os.path.basename(path.rstrip("/")) != "mem":
        return False
    resolved = os.path.realpath(path)
    return resolved.startswith("/proc/") or not (os.path.isabs(path) or os.path.isfile(path))


def _short(audit, filename):
    """A file of the case, relative to the working dir."""
    if type(filename) is str and _within(filename, audit.provenance.workdir):
        return os.path.relpath(filename, audit.provenance.workdir)
    return repr(filename)[:200]


def _callable_file(value):
    """The file of a function's (or bound method's) code; of another callable, its
    class's module; None for None."""
    if value is None:
        return None
    for _ in range(3):
        if type(value) is _METHOD:
            value = value.__func__
        if type(value) is _FUNCTION:
            return value.__code__.co_filename
        if type(value) is functools.partial:
            value = value.func
            continue
        break
    kind = type(value)
    if not _type_flags(kind) & _HEAPTYPE:
        return os.__file__  # a type defined in C (coverage's tracer): trusted
    return _module_file(kind)


def _module_file(kind):
    """The file of the module a class says it is of ("" when it names none that has one)."""
    name = _type_dict(kind).get("__module__")
    module = sys.modules.get(name) if type(name) is str else None
    path = vars(module).get("__file__") if type(module) is _MODULE else None
    return path if type(path) is str else ""


def _value_of_case(provenance, value, strict=False):
    """Whether a value is code of the case: a function it defined (a bound method's, a
    partial's, a static or class method's), a class it defined or an instance of one, a
    builtin method bound to such a value. A function compiled from a string counts as no
    one's (mock's autospec makes them), unless strict."""
    for _ in range(10):
        kind = type(value)
        if kind is _METHOD:
            if _value_of_case(provenance, value.__self__, strict):
                return True
            value = value.__func__
        elif kind is functools.partial:
            value = value.func
        elif kind in (staticmethod, classmethod):
            value = value.__func__
        elif kind is _FUNCTION:
            filename = value.__code__.co_filename
            return (strict or not _pseudo(filename)) and provenance.of_case(filename)
        elif kind in _BOUND_BUILTINS:
            value = value.__self__
            if type(value) is _MODULE or value is None:
                return False
        elif type in _type_mro(kind):
            return _made_by_case(provenance, value)
        else:
            return _made_by_case(provenance, kind)
    return False


def _made_by_case(provenance, kind):
    """A class the case defined: by the module it names, or by the code of any function
    of its own or of its bases' (a class can name any module as its own)."""
    if _class_of_case(provenance, kind):
        return True
    for klass in _type_mro(kind):
        if not _type_flags(klass) & _HEAPTYPE:
            continue
        for found in list(_type_dict(klass).values()):
            function = found.__func__ if type(found) in (staticmethod, classmethod) else found
            if type(function) is not _FUNCTION:
                continue
            filename = function.__code__.co_filename
            if not _pseudo(filename) and provenance.of_case(filename):
                return True
    return False


def _class_of_case(provenance, kind):
    """A class the case defined (a class defined in C is not)."""
    return bool(_type_flags(kind) & _HEAPTYPE) and provenance.of_case(_module_file(kind))


class Assertions:
    """The comparisons of a trusted test's `assert` (pytest's assertion rewriter, made to
    call `compare`): a value whose equality (or ordering, or hash) the case's code
    defines, compared with a value whose equality it does not (an int, a str, a
    Fraction, a list of them, a value of the tests' own), is compared by that value's
    rules, never asked itself; a value of a builtin type's subclass first becomes that
    builtin's value. Values of the case compared with each other are compared as Python
    does, and so is everything else. Inside lists, tuples, dicts and sets (and their
    subclasses that keep the builtin's equality) each element is compared so.

    `unittest.mock.ANY`, a Mock and pytest's approx are taken as the tests' own only in
    a test module whose source names them (ANY, Mock, approx); elsewhere the code under
    test made them, and they count as the case's."""

    def __init__(self):
        self.notes = []  # what a strict comparison decided, for the failing test's message
        self.sources = {}  # test file -> its text

    def compare(self, symbol, left, right, filename):
        """What pytest's rewritten `assert` in filename evaluates for `left <symbol> right`."""
        self.test_file = filename
        if symbol in ("==", "!="):
            strict = self.equal(left, right, 0, symbol)
            if strict is None:
                return left == right if symbol == "==" else left != right
            return strict if symbol == "==" else not strict
        if symbol in ("in", "not in"):
            strict = self.contains(right, left, 0)
            if strict is None:
                return left in right if symbol == "in" else left not in right
            return strict if symbol == "in" else not strict
        strict = self.order(symbol, left, right)
        return _ORDERINGS[symbol][2](left, right) if strict is None else strict

    def of_case(self, value, *names):
        """Whether the case's code defines any of the special methods `names` for value
        (the first class of its type's mro that has it), or value is a matcher the test
        module does not name."""
        kind = type(value)
        for name in names:
            for klass in _type_mro(kind):
                namespace = _type_dict(klass)
                if name in namespace:
                    if _type_flags(klass) & _HEAPTYPE and self.defined_by_case(
                        klass, namespace[name]
                    ):
                        return True
                    break
        return self.unnamed_matcher(kind)

    def defined_by_case(self, klass, value):
        if type(value) in (staticmethod, classmethod):
            value = value.__func__
        filename = None
        if type(value) is _FUNCTION:
            filename = value.__code__.co_filename
        if filename is None or _pseudo(filename):  # compiled from a string: its class's
            filename = _module_file(klass)
        answer = []
        _audit("pytest_launcher.of_case", filename, answer)
        return answer == [True]

    def unnamed_matcher(self, kind):
        mro = _type_mro(kind)
        for module, name, word in _MATCHERS:
            found = sys.modules.get(module)
            found = vars(found).get(name) if type(found) is _MODULE else None
            if type(found) is type and found in mro:
                return word not in self.source()
        return False

    def source(self):
        filename = self.test_file
        if filename not in self.sources:
            try:
                source = _source(filename)
                self.sources[filename] = source.decode("utf-8", "replace")
            except (OSError, TypeError, ValueError):
                self.sources[filename] = ""
        return self.sources[filename]

    def equal(self, left, right, depth, symbol="=="):
        """None: Python's == stands (nothing of the case's is asked, or the value of the
        case's that is tells a decoy from the other value); else whether they are equal
        by the rules of the value the case did not define."""
        if depth > _MAX_DEPTH:
            return None
        left_case = self.of_case(left, "__eq__", "__ne__")
        right_case = self.of_case(right, "__eq__", "__ne__")
        if left_case != right_case:
            value, other = (left, right) if left_case else (right, left)
            if not self.claims_anything(value, other, symbol):
                return None
            self.note(value, other, "__eq__" if symbol == "==" else "__ne__")
            plain = _plain(value)
            if plain is not value:
                found = self.equal(plain, other, depth + 1)
                return bool(plain == other) if found is None else found
            if self.of_case(value, "__class__", "__getattribute__"):
                return False  # it could pass for another type inside that type's __eq__
            return _lookup(type(other), "__eq__")(other, value) is True
        if left_case:
            return None  # the case's values compared with each other
        kinds = (_kind(left), _kind(right))
        if kinds[0] is None or kinds[1] is None or kinds[0] != kinds[1]:
            return None
        if kinds[0] in (list, tuple):
            return self.equal_sequences(_exact(left, kinds[0]), _exact(right, kinds[1]), depth)
        return self.equal_keyed(left, right, kinds[0], depth)

    def claims_anything(self, value, other, symbol):
        """Whether value says it stands in the relation (value <symbol> x) to a decoy:
        a fresh object, or a value of other's type that is not other (one past it, or
        past every value for an ordering). A value that equals anything, or any int,
        does; a value of the case's that compares honestly with other's type does not."""
        relation = _RELATIONS[symbol]
        for decoy in _decoys(other, symbol):
            try:
                if relation(value, decoy):
                    return True
            except Exception:  # noqa: S112 (refusing to compare with a decoy is honest)
                continue
        return False

    def equal_sequences(self, left, right, depth):
        if all(type(item) in _SCALARS for item in left) and all(
            type(item) in _SCALARS for item in right
        ):
            return None
        if len(left) != len(right):
            return False
        return all(self.same(a, b, depth + 1) for a, b in zip(left, right))  # noqa: B905

    def equal_keyed(self, left, right, kind, depth):
        """Dicts (and sets): by lookup while no key is the case's, else pair by pair."""
        if kind is dict:
            left_items, right_items = list(dict.items(left)), list(dict.items(right))
        else:
            left_items = [(item, None) for item in _exact(left, kind)]
            right_items = [(item, None) for item in _exact(right, kind)]
        keys = [key for key, _ in left_items + right_items]
        values = [value for _, value in left_items + right_items]
        plain_keys = all(self.trusted_key(key) for key in keys)
        if plain_keys and all(type(value) in _SCALARS for value in values):
            return None
        if len(left_items) != len(right_items):
            return False
        if plain_keys:
            other = dict(right_items)
            return all(
                key in other and self.same(value, other[key], depth + 1)
                for key, value in left_items
            )
        remaining = list(right_items)
        for key, value in left_items:
            for index, (other_key, other_value) in enumerate(remaining):
                if self.same(key, other_key, depth + 1) and self.same(
                    value, other_value, depth + 1
                ):
                    del remaining[index]
                    break
            else:
                return False
        return True

    def trusted_key(self, key):
        if type(key) in _SCALARS:
            return True
        if self.of_case(key, "__eq__", "__hash__"):
            return False
        if _kind(key) in (tuple, frozenset):
            return all(self.trusted_key(item) for item in key)
        return True

    def same(self, left, right, depth):
        """As Python compares two elements of a container: the same object, or equal."""
        if left is right:
            return True
        found = self.equal(left, right, depth)
        return bool(left == right) if found is None else found

    def contains(self, container, item, depth):
        """`item in container` for a list, tuple, set or dict (its keys): element by
        element once the item or an element is the case's. Another container (a str,
        one of the case's own) answers by its own rules."""
        kind = _kind(container)
        if kind is None:
            return None
        items = list(dict.keys(container)) if kind is dict else _exact(container, kind)
        if self.trusted_key(item) and all(type(element) in _SCALARS for element in items):
            return None
        return any(self.same(item, element, depth + 1) for element in items)

    def order(self, symbol, left, right):
        forward, reflected, _ = _ORDERINGS[symbol]
        left_case = self.of_case(left, forward)
        right_case = self.of_case(right, reflected)
        if left_case == right_case:
            return None
        value, other = (left, right) if left_case else (right, left)
        seen = symbol if left_case else _MIRRORED[symbol]  # as the value sees it
        if not self.claims_anything(value, other, seen):
            return None
        self.note(value, other, forward if left_case else reflected)
        plain = _plain(value)
        if plain is not value:
            pair = (plain, right) if left_case else (left, plain)
            found = self.order(symbol, *pair)
            return bool(_ORDERINGS[symbol][2](*pair)) if found is None else found
        if self.of_case(value, "__class__", "__getattribute__"):
            return False
        if left_case:
            return _lookup(type(right), reflected)(right, left) is True
        return _lookup(type(left), forward)(left, right) is True

    def note(self, value, other, method):
        other = _type_name(type(other))
        note = (
            f"the verifier compared {_type_name(type(value))} (of the code under test) "
            f"with {other} by {other}'s rules, not asking its {method}"
        )
        if len(self.notes) < 3 and note not in self.notes:
            self.notes.append(note)


class _Decoy:
    """A value nothing honest equals or orders against."""

    __slots__ = ()


def _decoys(other, symbol):
    """Values that `value <symbol> decoy` holds for only when value claims it of
    anything: a fresh object; for ==, != a value of other's type that is not other; for
    an ordering, of other's type, one beyond every value that ordering allows."""
    decoys = [_Decoy()]
    kind = type(other)
    if symbol in ("==", "!="):
        if kind is bool:
            decoys.append(not other)
        elif kind in (int, float, complex) or _numeric(kind):
            with contextlib.suppress(Exception):
                decoys += [other + 1, -other - 7]
        elif kind in (str, bytes, tuple, list):
            decoys.append(other + kind((_Decoy(),) if kind in (tuple, list) else "\x00"))
        elif kind in (set, frozenset):
            decoys.append(other | {_Decoy()})
        elif kind is dict:
            decoys.append({**other, _Decoy(): None})
    elif symbol in ("<", "<=") and kind in _LEAST:
        decoys.append(_LEAST[kind])
    elif symbol in (">", ">=") and kind in _GREATEST:
        decoys.append(_GREATEST[kind])
    return decoys


def _numeric(kind):
    """fractions.Fraction or decimal.Decimal (values one can add 1 to)."""
    for module, name in (("fractions", "Fraction"), ("decimal", "Decimal")):
        found = sys.modules.get(module)
        if type(found) is _MODULE and vars(found).get(name) is kind:
            return True
    return False


def _lookup(kind, name):
    """The special method `name` of a type, as Python finds it (its mro's dicts)."""
    for klass in _type_mro(kind):
        namespace = _type_dict(klass)
        if name in namespace:
            return namespace[name]
    return lambda *_arguments: NotImplemented


def _kind(value):
    """list, tuple, dict, set or frozenset when value compares as that builtin does
    (an instance of it, or of a subclass that keeps its __eq__); else None."""
    for klass in _type_mro(type(value)):
        if "__eq__" in _type_dict(klass):
            if klass in (list, tuple, dict):
                return klass
            return set if klass in (set, frozenset) else None
    return None


def _exact(value, kind):
    """The items of a list, tuple or set (of a subclass too) as the builtin holds them."""
    if kind in (list, tuple):
        return kind.__getitem__(value, slice(None))
    if set in _type_mro(type(value)):
        return list(set.__iter__(value))
    return list(frozenset.__iter__(value))


def _plain(value):
    """The value of a builtin type the case's subclass of it holds (its own methods not
    asked), or value itself."""
    for klass in _type_mro(type(value))[1:]:
        if klass in _PLAIN:
            return _PLAIN[klass](value)
    return value


def _type_name(kind):
    module, name = _type_dict(kind).get("__module__"), _type_qualname(kind)
    if type(module) is str and module != "builtins":
        return f"{module}.{name}"
    return name


def _strict_assertions(assertions):
    """pytest's assertion rewriter made to compare through `assertions.compare` (an
    `is` stays as it is); without a rewriter (pytest before 6: --assert=plain) nothing."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return assertions
    rewriter = rewrite.AssertionRewriter
    original, original_run = rewriter.visit_Compare, rewriter.run
    symbols = _SYMBOLS

    def visit_Compare(self, comp):  # noqa: N802 (ast.NodeVisitor's name)
        start = len(self.statements)
        result = original(self, comp)
        for statement in self.statements[start:]:
            value = getattr(statement, "value", None)
            if type(statement) is not ast.Assign or type(value) is not ast.Compare:
                continue
            if len(value.ops) != 1 or type(value.ops[0]) not in symbols:
                continue
            symbol = ast.Constant(symbols[type(value.ops[0])])
            function = ast.Name(_COMPARE_NAME, ast.Load())
            call = ast.Call(function, [symbol, value.left, value.comparators[0]], [])
            statement.value = ast.copy_location(call, value)
        return result

    def run(self, mod):
        """pytest's own, then `@verifier_compare` bound beside `@pytest_ar`: the asserts
        look it up in their module's globals (which the launcher hands each test a copy
        of), not as an attribute of a module of pytest's (which the case can reach)."""
        original_run(self, mod)
        body = getattr(mod, "body", [])
        for index, statement in enumerate(body):
            names = getattr(statement, "names", ())
            if type(statement) is ast.Import and [alias.asname for alias in names] == [
                "@pytest_ar"
            ]:
                at = {"lineno": statement.lineno, "col_offset": 0}  # as pytest's own imports
                alias = ast.alias("_verifier_compare", _COMPARE_NAME, **at)
                found = ast.ImportFrom("_pytest.assertion.rewrite", [alias], 0, **at)
                body.insert(index + 1, found)
                break

    names = {"ast": ast, "_COMPARE_NAME": _COMPARE_NAME}
    rewriter.visit_Compare = _sealed(visit_Compare, names)
    rewriter.run = _sealed(run, {"ast": ast, "_COMPARE_NAME": _COMPARE_NAME})
    rewrite._verifier_compare = _compare
    return assertions


class Integrity:
    """What the outcomes and the report rest on, pinned by identity before any code of
    the case runs; checked at each test's report and after the run. `found` says what
    changed (each fact once): any of it voids the run.

    Every comparison is by identity and every type test exact (`type(x) is ...`), so
    that no object of the case is asked anything (an `__eq__` or a `__class__` could
    lie)."""

    def __init__(self, workdir, plugins, found, touched, provenance, *, tests_root=None, code=None):
        self.workdir = workdir
        self.provenance = provenance
        self.tests_root = tests_root  # the trusted tests handed over, outside the repo
        self.code = code  # TrustedCode: what the store's entries say a source imports
        self.started = time.time_ns()  # what was written after this, the case wrote
        self.found = found
        self.touched = touched  # the functions whose code or defaults were set: see holds()
        # (what, namespace, name, value), (what, function, its code, defaults, kwdefaults,
        # closure cells' contents), (what, object, its type, its mro): checked when each
        # test is torn down (index 0: pytest's core and hooks, this script; what honest
        # tests monkeypatch is restored by then) or after the run alone (1: the rest, such
        # as builtins and the test modules).
        self.bindings = ([], [])
        self.functions = ([], [])
        self.objects = ([], [])
        self.bulk = [None, None]  # each index's pins gathered for holds()
        self.by_namespace = None  # the pins by namespace: see pinned_names()
        self.source_names = {}  # id(a test module's globals) -> the names its source binds
        self.collecting = None  # the pinned names' values before the first module
        self.trusted = set()  # ids of the pinned functions (kept alive): trusted hooks
        self.impls = []  # (hook, implementation, its function) before any conftest
        self.impls_bulk = ((), ())  # the implementations and their functions, as tuples
        self.impl_ids = set()
        self.vetted = {}  # id -> (a later implementation found trusted, its function)
        self.seen = {}  # hook name -> its implementations, all good at the last check
        self.pinned_hooks = {}  # hook name -> its implementations before any conftest
        self.relay = None
        self.kinds = (set(), set())  # the types of pluggy's hook callers and implementations
        self.tests = {}  # node id -> (item, its function, that function's code)
        self.test_modules = []
        for name, module in list(sys.modules.items()):
            if (
                name.split(".")[0] in _PINNED_PACKAGES
                or name in _WRITER_MODULES
                or any(module is plugin for plugin in plugins)
            ):
                every = name.startswith(_CORE)
                self.bind(f"sys.modules[{name!r}]", sys.modules, name, module, every)
                self.pin_namespace(name, vars(module), every, classes=True)
        self.pin_namespace("pytest_launcher", globals(), True, classes=True, data=True)
        for name, names in _WRITER_NAMES.items():
            namespace = vars(sys.modules[name])
            for attribute in names:
                self.bind(name, namespace, attribute, namespace[attribute], False)
        namespace = vars(builtins)
        for name, value in list(namespace.items()):
            replaceable = name in _REPLACEABLE_BUILTINS
            if type(value) in (types.BuiltinFunctionType, type) and not replaceable:
                self.bind("builtins", namespace, name, value, True)

    def pinned_names(self, namespace):
        """(names, their pinned values) of a namespace's pins (none for one not pinned)."""
        sizes = (len(self.bindings[0]), len(self.bindings[1]))
        if self.by_namespace is None or self.by_namespace[0] != sizes:
            spaces = {}
            for pins in self.bindings:
                for _, space, name, value in pins:
                    spaces.setdefault(id(space), {})[name] = value
            spaces = {key: (tuple(names), tuple(names.values())) for key, names in spaces.items()}
            self.by_namespace = (sizes, spaces)
        return self.by_namespace[1].get(id(namespace), ((), ()))

    def bind(self, what, namespace, name, value, every):
        """namespace[name] must stay value (and a function's code its code)."""
        self.bindings[not every].append((what, namespace, name, value))
        if type(value) is _FUNCTION:
            self.pin_function(f"{what}.{name}", value, every)

    def pin_function(self, what, function, every):
        cells = tuple(_cell_contents(cell) for cell in function.__closure__ or ())
        self.functions[not every].append(
            (
                what,
                function,
                function.__code__,
                function.__defaults__,
                function.__kwdefaults__,
                cells,
            )
        )
        self.trusted.add(id(function))

    def pin_namespace(self, what, namespace, every, classes=False, data=False):
        """A module's (or class's) callables, classes and modules (with data: all of
        its names); with classes: the dicts of the classes it defines, and their
        functions, descriptors' functions and mro."""
        owner = namespace.get("__name__")
        for name, value in list(namespace.items()):
            if name in _UNPINNED:
                continue
            if not (data or callable(value) or type(value) is _MODULE or _wrapped(value)):
                continue
            self.bind(what, namespace, name, value, every)
            if classes and isinstance(value, type) and value.__dict__.get("__module__") == owner:
                self.objects[not every].append(
                    (f"{what}.{name}", value, type(value), value.__mro__)
                )
                self.pin_namespace(f"{what}.{name}", value.__dict__, every)
            for function in _wrapped(value):
                self.pin_function(f"{what}.{name}", function, every)

    def pin_hooks(self, manager):
        """pytest's hooks before the first conftest: every implementation, each caller,
        and the manager's own callables."""
        self.relay = manager.hook
        self.bind("the plugin manager", vars(manager), "hook", manager.hook, True)
        self.pin_namespace("the plugin manager", vars(manager), True)
        for name, caller in list(vars(manager.hook).items()):
            self.kinds[0].add(type(caller))
            self.bind("pytest's hooks", vars(manager.hook), name, caller, True)
            for implementation in caller.get_hookimpls():
                self.kinds[1].add(type(implementation))
                self.impls.append((name, implementation, implementation.function))
                self.impl_ids.add(id(implementation))
                self.pinned_hooks.setdefault(name, []).append(implementation)

    def pin_tests(self, items):
        """When collection ends: each test's function and code, and the callables bound
        in the test modules (the functions a test calls, its helpers' too)."""
        modules = {}
        for item in items:
            function = _function(getattr(item, "obj", None))
            code = function.__code__ if type(function) is _FUNCTION else None
            self.tests[item.nodeid] = (item, function, code)
            module = getattr(item, "module", None)
            if type(module) is _MODULE:
                modules[id(module)] = module
        for module in modules.values():
            self.test_modules.append(module)
            self.pin_namespace(f"test module {module.__name__}", vars(module), True)
            path = vars(module).get("__file__")
            bound = _bound_names(path) if type(path) is str else None
            if bound is not None:
                self.source_names[id(vars(module))] = bound
            self.check_helpers(module)

    def check_helpers(self, module):
        """Each module a test module imports from beside it (in the dir pytest put on
        sys.path for it) must be that helper's file, and what the test module took from
        it that the helper defines must be the helper's own: not a module the code under
        test put in sys.modules, nor a function it put in the helper, before the tests
        imported it. (Functions the helper imports from elsewhere are not asked.)"""
        path = vars(module).get("__file__")
        if type(path) is not str:
            return
        base, top = _import_base(path)
        # Tests at the repo's root: no telling their helpers from the code.
        handed = self.tests_root is not None and _within(top, self.tests_root)
        beside = handed or (top != self.workdir and _within(top, self.workdir))
        package = vars(module).get("__package__")
        known = self.code.imports.get(path) if self.code is not None else None
        imported = _resolved(known, package) if known is not None else _imports(path, package)
        for name, bound in imported:
            helper = _helper_file(base, name) if beside else None
            if helper is None or not _within(helper, top):
                self.check_import(module, name, bound)
                continue
            found = sys.modules.get(name)
            origin = vars(found).get("__file__") if type(found) is _MODULE else None
            if origin != helper and not self.installed(origin):
                self.find(f"{module.__name__} imported {name}, which is not {helper}")
            elif origin == helper and bound in self.defined(helper):
                value = vars(module).get(bound)
                if not _defined_in(value, helper, name, self.workdir):
                    self.find(f"{module.__name__}.{bound} is not the one {name} defines")

    def check_import(self, module, name, bound):
        """A name the test module imported from a module outside the working dir (the
        standard library, an installed package) must not be code of the case: not a
        stand-in the code under test bound in the test module, or in that module, before
        the test module imported it (while it was imported, say)."""
        found = sys.modules.get(name)
        origin = vars(found).get("__file__") if type(found) is _MODULE else None
        if bound is None or (type(origin) is str and _within(origin, self.workdir)):
            return
        if _value_of_case(self.provenance, vars(module).get(bound)):
            self.find(f"{module.__name__}.{bound} (from {name}) is code of the case")

    def defined(self, path):
        """The names a helper's source defines at its top level: as the store's entry for
        the source imported says, else parsed from the file."""
        known = self.code.definitions.get(path) if self.code is not None else None
        return known if known is not None else _definitions(path)

    def installed(self, path):
        """A file of the toolchain: outside the repo, there before the run."""
        return type(path) is str and not _within(path, self.workdir) and self.existed(path)

    def check_collecting(self):
        """Before any conftest, before each test module is imported, and when
        collection ends: no pinned name newly bound to code of the case since the last
        look. Code of the case that runs when a conftest or a test module imports it
        and rewrites pytest (its assertion rewriter, say) for the test modules imported
        after, to put it back before anything is torn down, is seen before the next
        module is imported. (What pytest's own plugins patch when configured is
        pytest's code, not the case's.)"""
        values = [
            tuple(namespace.get(name, _ABSENT) for _, namespace, name, _ in pins)
            for pins in self.bindings
        ]
        last, self.collecting = self.collecting, values
        if last is None:
            return
        for pins, now, then in zip(self.bindings, values, last):  # noqa: B905
            if len(now) != len(then) or not any(map(operator.is_not, now, then)):
                continue
            for (what, _, name, _), value, held in zip(pins, now, then):  # noqa: B905
                if value is not held and _value_of_case(self.provenance, value, strict=True):
                    self.find(f"{what}.{name} was bound to code of the case while collecting")

    def check_test(self, node_id):
        """When a test was torn down: pytest's core, the hooks, the test's function."""
        self.check(0)
        self.check_hooks(ended=False)
        pinned = self.tests.get(node_id)
        if pinned is not None:
            self.check_item(*pinned)

    def check_all(self):
        """After the run: everything pinned."""
        self.check(0)
        self.check(1)
        self.check_hooks(ended=True)
        for pinned in list(self.tests.values()):
            self.check_item(*pinned)

    def check(self, index):
        """Every pin of the index: all of them at once by identity (C loops), then, only
        when one broke, one by one to name it."""
        if self.holds(index):
            return
        for what, namespace, name, value in self.bindings[index]:
            if namespace.get(name, _ABSENT) is not value:
                self.find(f"{what}.{name} was replaced")
        for what, function, code, defaults, kwdefaults, cells in self.functions[index]:
            if (
                function.__code__ is not code
                or function.__defaults__ is not defaults
                or function.__kwdefaults__ is not kwdefaults
                or not _same(cells, function.__closure__)
            ):
                self.find(f"the code of {what} was changed")
        for what, value, kind, mro in self.objects[index]:
            if type(value) is not kind or value.__mro__ is not mro:
                self.find(f"the class {what} was changed")

    def holds(self, index):
        """Whether every pin of the index holds, compared in bulk (a pin added since the
        last call rebuilds the bulk form first)."""
        sizes = tuple(len(pins[index]) for pins in (self.bindings, self.functions, self.objects))
        if self.bulk[index] is None or self.bulk[index][0] != sizes:
            self.bulk[index] = (sizes, self.gather(index))
        spaces, functions, classes = self.bulk[index][1]
        for get, namespaces, names, values in spaces:  # one C loop per kind of namespace
            if any(map(operator.is_not, map(get, namespaces, names, repeat(_ABSENT)), values)):
                return False
        pinned, cells, contents = functions
        try:
            if any(map(operator.is_not, map(_CONTENTS, cells), contents)):
                return False
        except ValueError:  # a cell emptied since
            return False
        # Setting a function's code or defaults raises an audit event, which notes the
        # function (reading them raises one too, which makes comparing them all dear):
        # only those can have changed.
        for function in list(self.touched.values()):
            held = pinned.get(function)  # a function hashes by identity: no id() (audited)
            if held is not None and (
                function.__code__ is not held[0]
                or function.__defaults__ is not held[1]
                or function.__kwdefaults__ is not held[2]
            ):
                return False
        kinds, values, mros = classes
        return not (
            any(map(operator.is_not, map(type, values), kinds))
            or any(map(operator.is_not, map(_type_mro, values), mros))
        )

    def gather(self, index):
        """The pins of the index as parallel tuples: per kind of namespace (dicts, the
        classes' mapping proxies) its get, and (namespace, name, value) flattened; the
        functions' (code, defaults, kwdefaults) by function, and their closure cells (an empty
        one is held empty by keeping it out: reading it raises); the classes' types and
        mros."""
        spaces = {}
        for _, namespace, name, value in self.bindings[index]:
            kind = type(namespace)
            entry = spaces.setdefault(kind, (kind.get, [], [], []))
            entry[1].append(namespace)
            entry[2].append(name)
            entry[3].append(value)
        functions = self.functions[index]
        cells = [
            (cell, value)
            for _, function, _, _, _, contents in functions
            for cell, value in zip(function.__closure__ or (), contents)  # noqa: B905
            if value is not _ABSENT
        ]
        objects = self.objects[index]
        return (
            tuple(
                (get, tuple(namespaces), tuple(names), tuple(values))
                for get, namespaces, names, values in spaces.values()
            ),
            (
                {entry[1]: entry[2:5] for entry in functions},
                tuple(cell for cell, _ in cells),
                tuple(value for _, value in cells),
            ),
            (
                tuple(entry[2] for entry in objects),
                tuple(entry[1] for entry in objects),
                tuple(entry[3] for entry in objects),
            ),
        )

    def check_hooks(self, ended):
        """Each implementation of each hook: pytest's own as pinned, and any later one
        pytest's, pluggy's, a plugin's, a conftest's or a declared plugin module's. A
        hook whose implementations are those found good at the last check is passed."""
        if self.relay is None:
            return
        for name, caller in list(vars(self.relay).items()):
            if type(caller) not in self.kinds[0]:
                self.find(f"pytest's hook {name} was replaced")
                continue
            implementations = caller.get_hookimpls()
            known = self.seen.get(name)
            if (
                known is not None
                and len(known) == len(implementations)
                and all(map(operator.is_, known, implementations))
            ):
                continue
            if self.check_hook(name, implementations, ended):
                self.seen[name] = tuple(implementations)
        if len(self.impls_bulk[0]) != len(self.impls):
            self.impls_bulk = (
                tuple(implementation for _, implementation, _ in self.impls),
                tuple(function for _, _, function in self.impls),
            )
        pinned, functions = self.impls_bulk
        if any(map(operator.is_not, map(_IMPLEMENTED, pinned), functions)):
            for name, implementation, function in self.impls:
                if implementation.function is not function:
                    self.find(f"an implementation of pytest's hook {name} was replaced")

    def check_hook(self, name, implementations, ended):
        """Whether one hook's implementations are all good (each fact found else)."""
        good = True
        present = set(map(id, implementations))
        for implementation in implementations:
            if id(implementation) in self.impl_ids:
                continue
            function = implementation.function
            vetted = self.vetted.get(id(implementation))
            if vetted is not None and vetted[0] is implementation and vetted[1] is function:
                continue  # found trusted at an earlier check, and unchanged
            if type(implementation) in self.kinds[1] and self.trusted_hook(function):
                self.vetted[id(implementation)] = (implementation, function)
            else:
                good = False
                self.find(
                    f"pytest's hook {name} has an implementation the code of the "
                    f"case added ({_plugin_name(implementation)})"
                )
        for implementation in self.pinned_hooks.get(name, ()):
            if not ended and id(implementation) not in present:
                good = False
                self.find(
                    f"an implementation of pytest's hook {name} was removed "
                    f"({_plugin_name(implementation)})"
                )
        return good

    def trusted_hook(self, function):
        """pytest's, pluggy's or a plugin's function (pinned), or one defined in the
        source of a module that was there before the run: installed in the toolchain, a
        conftest.py, a test module, or a module a conftest's or test module's
        `pytest_plugins` names."""
        function = _function(function)
        if id(function) in self.trusted:
            return True
        if type(function) is not _FUNCTION:
            return False
        namespace = function.__globals__
        namespace = namespace.get(_PRIVATE_MARK, namespace)  # a test's private copy: its own
        name, path = namespace.get("__name__"), namespace.get("__file__")
        module = sys.modules.get(name) if type(name) is str else None
        if type(module) is not _MODULE or vars(module) is not namespace or type(path) is not str:
            return False
        if function.__code__.co_filename != path or not self.existed(path):
            return False
        if not _within(path, self.workdir) or os.path.basename(path) == "conftest.py":
            return True
        return any(module is test for test in self.test_modules) or (
            name in self.declared_plugins()
        )

    def existed(self, path):
        try:
            return os.stat(path).st_ctime_ns < self.started
        except OSError:
            return False

    def declared_plugins(self):
        """The names in `pytest_plugins` of the test modules and the conftests."""
        modules = list(self.test_modules)
        for module in list(sys.modules.values()):
            path = vars(module).get("__file__") if type(module) is _MODULE else None
            if (
                type(path) is str
                and os.path.basename(path) == "conftest.py"
                and _within(path, self.workdir)
                and self.existed(path)
            ):
                modules.append(module)
        names = set()
        for module in modules:
            declared = vars(module).get("pytest_plugins", ())
            declared = (declared,) if type(declared) is str else declared
            if type(declared) in (list, tuple):
                names.update(entry for entry in declared if type(entry) is str)
        return names

    def check_item(self, item, function, code):
        obj = vars(item).get("_obj")  # pytest's cache of item.obj (reading obj may rebuild it)
        if (obj is not None and _function(obj) is not function) or (
            code is not None and function.__code__ is not code
        ):
            self.find(f"the test {item.nodeid} was replaced")
        for name in list(vars(item)):
            if type(getattr(type(item), name, None)) is _FUNCTION:
                self.find(f"the test {item.nodeid} has its own {name}")

    def find(self, fact):
        if fact not in self.found and len(self.found) < _MAX_FOUND:
            self.found.append(fact)


_ABSENT = object()


def _import_base(path):
    """(the dir pytest's append mode puts on sys.path for a test file, the dir of the
    tests): the file's own dir twice, or above the topmost package it is in and that
    package."""
    top = base = os.path.dirname(os.path.abspath(path))
    while os.path.isfile(os.path.join(base, "__init__.py")):
        top, base = base, os.path.dirname(base)
    return base, top


def _helper_file(base, name):
    """The file under base that `import name` finds there, or None."""
    stem = os.path.join(base, *name.split("."))
    for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


def _source(path):
    """A module's source: the one handed over for a trusted test (its file is an empty
    stand-in), else its file's bytes."""
    handed = _HANDED.get(path) if type(path) is str else None
    if handed is not None:
        return handed
    with open(path, "rb") as handle:
        return handle.read()


def _imports(path, package):
    """(module, name bound from it or None) of each import at a module's top level."""
    try:
        tree = ast.parse(_source(path))
    except (OSError, SyntaxError, ValueError):
        return []
    return _resolved(_raw_imports(tree), package)


def _raw_imports(tree):
    """Each import at a module's top level: (0, None, ((module, None), ...)) for `import`,
    (level, module, (name bound, ...)) for `from`."""
    found = []
    for node in tree.body:
        if type(node) is ast.Import:
            found.append((0, None, tuple((alias.name, None) for alias in node.names)))
        elif type(node) is ast.ImportFrom and node.module:
            names = tuple(alias.asname or alias.name for alias in node.names)
            found.append((node.level, node.module, names))
    return tuple(found)


def _resolved(raw, package):
    """_raw_imports' as (module, name bound from it or None), a relative one resolved
    within the test module's package."""
    found = []
    for level, module, names in raw:
        if module is None:
            found += list(names)
            continue
        name = module
        if level:
            parts = package.split(".") if type(package) is str and package else []
            if level - 1 > len(parts) or not parts:
                continue
            name = ".".join([*parts[: len(parts) - level + 1], module])
        found += [(name, bound) for bound in names]
    return found


def _bound_names(path):
    """The names a module's source binds at its top level (imports, def, class,
    assignments, loops, with) or in a `global` statement; None when it cannot be told
    (no source, `import *`)."""
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return None
    names = set()
    for node in ast.walk(tree):
        if type(node) is ast.Global:
            names.update(node.names)
    for node in tree.body:
        for part in ast.walk(node):
            if type(part) in (ast.Import, ast.ImportFrom):
                for alias in part.names:
                    if alias.name == "*":
                        return None
                    names.add(alias.asname or alias.name.split(".")[0])
            elif type(part) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                names.add(part.name)
            elif type(part) is ast.Name and type(part.ctx) is ast.Store:
                names.add(part.id)
    return frozenset(names)


def _definitions(path):
    """The names a module's source defines at its top level (def and class)."""
    try:
        tree = ast.parse(_source(path))
    except (OSError, SyntaxError, ValueError):
        return set()
    return _defined(tree)


def _defined(tree):
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return frozenset(node.name for node in tree.body if type(node) in kinds)


def _defined_in(value, path, name, workdir):
    """A function compiled from path, or one that wraps it (its decorators' wrappers,
    through their __wrapped__ and closures, none of them code of the repo: a decorator
    of an installed package, such as hypothesis' composite, makes one); or a class of the
    module name."""
    if issubclass(type(value), type):
        return value.__dict__.get("__module__") == name
    pending = [value]
    for _ in range(20):
        if not pending:
            return False
        function = _function(pending.pop(0))
        if type(function) is not _FUNCTION:
            continue
        filename = function.__code__.co_filename
        if filename == path:
            return True
        if type(filename) is str and not _pseudo(filename) and _within(filename, workdir):
            return False  # code of the repo stands between
        pending.append(vars(function).get("__wrapped__"))
        pending.extend(_cell_contents(cell) for cell in function.__closure__ or ())
    return False


def _function(value):
    """The function of a bound method, else the value."""
    return value.__func__ if type(value) is _METHOD else value


def _wrapped(value):
    """The functions a class attribute wraps (classmethod, staticmethod, property)."""
    if type(value) in (classmethod, staticmethod):
        return (value.__func__,) if type(value.__func__) is _FUNCTION else ()
    if type(value) is property:
        return tuple(f for f in (value.fget, value.fset, value.fdel) if type(f) is _FUNCTION)
    return ()


def _cell_contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return _ABSENT


def _same(cells, closure):
    closure = closure or ()
    pairs = zip(cells, closure)  # noqa: B905 (Python 3.8: no strict; the lengths are compared)
    return len(cells) == len(closure) and all(value is _cell_contents(c) for value, c in pairs)


def _plugin_name(implementation):
    name = getattr(implementation, "plugin_name", None)
    return name[:100] if type(name) is str else "a plugin"


class TrustedCode:
    """Byte code the launcher can trust without compiling: the grader's store (--pyc).

    The grader keeps a store of compiled modules that no command can reach, each entry
    named by the SHA-256 of the source it was compiled from and by its variant (the
    interpreter's magic, and for a rewritten test module pytest's version, this script's
    own digest and the author's plugins). For a run it hands over, read-only
    ($VERIFIER_PROVIDED/pyc), the entries of the files the last run of the same tests
    imported. A module of the case being imported (plain, or rewritten by pytest) is
    looked up by the hash of the very source being imported, so an entry is that
    source's compile or nothing: none of the case's can stand in for it. An entry holds
    the code, and the imports and definitions at the source's top level (what
    check_helpers asks, unparsed).

    Entries are made only here, before any code of the case runs (fill: the files the
    grader names, those the last run imported that the store lacks, for at most
    _FILL_SECONDS), and handed back signed with the run's key; the code compiled so is
    what this run imports. What this run looked up is handed back unsigned, as a hint of
    what to compile next time: the code under test can forge it, which can only cost
    time."""

    def __init__(self, workdir, provided, pytest, plugins):
        import importlib.util

        self.workdir = workdir
        self.provided = provided
        self.store = os.path.join(provided, PYC_DIR)
        own = hashlib.sha256()
        with open(os.path.abspath(__file__), "rb") as handle:
            own.update(handle.read())
        for plugin in plugins:  # a plugin may change how pytest rewrites
            own.update(f"\0{plugin.__name__}={getattr(plugin, '__version__', '')}".encode())
        digest = own.hexdigest()[:16]
        magic = importlib.util.MAGIC_NUMBER.hex()
        plain = f"{sys.implementation.cache_tag}-{magic}-o{sys.flags.optimize}"
        self.rewriting = f"{plain}-pytest-{getattr(pytest, '__version__', '')}-{digest}"
        self.variants = {"plain": _safe(plain), "test": _safe(self.rewriting + "-h0")}
        self.compiled = {}  # (source's sha256, variant) -> the entry compiled now (marshal)
        self.seen = {}  # relative path -> (kind, variant, sha256) of each file looked up
        self.imports = {}  # path -> the raw imports of the entry it was loaded from
        self.definitions = {}  # path -> the names defined, likewise

    def pass_hook(self, enabled):
        """pytest's `enable_assertion_pass_hook` (the trusted ini's) changes the rewrite."""
        self.variants["test"] = _safe(f"{self.rewriting}-h{int(bool(enabled))}")

    def lookup(self, path, source, kind, loading=True):
        """The code of the entry compiled from source (bytes) for kind ("plain", "test"),
        its filename made path, or None; `loading`: what it imports and defines noted
        as path's, and path as looked up."""
        variant = self.variants.get(kind)
        if variant is None or type(path) is not str or type(source) is not bytes:
            return None
        digest = hashlib.sha256(source).hexdigest()
        if loading and _within(path, self.workdir) and len(self.seen) < _MAX_SEEN:
            self.seen[os.path.relpath(path, self.workdir)] = (kind, variant, digest)
        compiled = self.compiled.get((digest, variant))  # a fresh copy: no code is shared
        if compiled is not None:
            entry = _entry(compiled)
        else:
            entry = _read_entry(os.path.join(self.store, digest, variant))
        if entry is None:
            return None
        imports, definitions, code = entry
        if loading:
            self.imports[path] = imports
            self.definitions[path] = definitions
        fix = getattr(sys.modules.get("_imp"), "_fix_co_filename", None)
        if code.co_filename != path:
            if fix is None:
                return None
            fix(code, path)  # as importlib does for a .pyc: nested code objects too
        return code

    def fill(self):
        """Compile what the grader names (before any code of the case runs): the entries
        as the JSON document to hand back, b"" when none."""
        try:
            with open(os.path.join(self.provided, PYC_FILL), "rb") as handle:
                lines = handle.read(1024 * 1024).decode("utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return b""
        root = os.path.realpath(self.workdir)
        entries = []
        deadline = time.monotonic() + _FILL_SECONDS  # the rest next time: a hint is forgeable
        for line in lines[:_MAX_SEEN]:
            if time.monotonic() > deadline:
                break
            kind, _, relative = line.partition("\t")
            path = os.path.join(self.workdir, relative)
            if kind not in self.variants or not _within(os.path.realpath(path), root):
                continue
            try:
                with open(path, "rb") as handle:
                    source = handle.read(_MAX_SOURCE + 1)
                entry = _compile_entry(kind, source, path)
            except Exception:  # noqa: S112 (what cannot be compiled now is compiled when imported)
                continue
            if len(source) > _MAX_SOURCE:
                continue
            digest, variant = hashlib.sha256(source).hexdigest(), self.variants[kind]
            self.compiled[(digest, variant)] = data = marshal.dumps(entry)
            encoded = base64.b64encode(data).decode("ascii")
            entries.append({"sha256": digest, "variant": variant, "data": encoded})
        return json.dumps({"entries": entries}).encode("utf-8") if entries else b""

    def seen_document(self):
        seen = [[kind, path, *found] for path, (kind, *found) in self.seen.items()]
        return json.dumps({"seen": seen}).encode("utf-8")


def _compile_entry(kind, source, path):
    """(raw imports, definitions, code) of a source: compiled as importlib compiles a
    module, or for a test module rewritten as pytest rewrites it (with the strict
    assertions; the ini's pass hook off)."""
    tree = ast.parse(source, filename=path)
    meta = (_raw_imports(tree), _defined(tree))
    if kind == "test":
        from _pytest.assertion import rewrite

        rewrite.rewrite_asserts(tree, source, path, None)
        return (*meta, compile(tree, path, "exec", dont_inherit=True))
    return (*meta, compile(source, path, "exec", dont_inherit=True))


def _read_entry(path):
    """An entry of the store (the grader's, read-only), or None."""
    try:
        with open(path, "rb") as handle:
            return _entry(handle.read())
    except OSError:
        return None


def _entry(data):
    """(raw imports, definitions, code) of an entry's bytes, or None."""
    try:
        entry = marshal.loads(data)  # noqa: S302 (the store's, or compiled here: trusted)
    except Exception:
        return None
    if type(entry) is not tuple or len(entry) != 3 or type(entry[2]) is not types.CodeType:
        return None
    return entry


def _safe(name):
    return "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in name)


class Forwarder:
    """The plugin pytest calls. It keeps nothing: each hook hands its arguments to the
    audit hook (sys.audit), which alone holds the run's records (Run), so that no code of
    the case reaches them through pytest's objects. The audit hook takes an event only
    from these functions' own code, called by pytest (no code of the case on the stack).
    Its functions are sealed (see _sealed): sys.audit is a default of each.

    A test's function is called (pytest_pyfunc_call) as pytest's own hook calls it, but
    with a copy of its module's globals and of the builtins made for that call (Run's
    private_test): what the code under test rebinds in the module or the builtins while
    the test runs, and puts back, the test never looks up."""

    def pytest_load_initial_conftests(self, early_config, _audit=_audit):
        _audit("pytest_launcher.load_initial_conftests", early_config)

    def pytest_pycollect_makemodule(self, parent, _audit=_audit):
        _audit("pytest_launcher.pycollect_makemodule", None)
        outcome = yield
        _audit("pytest_launcher.pycollect_makemodule", outcome)

    def pytest_collection_finish(self, session, _audit=_audit):
        _audit("pytest_launcher.collection_finish", session)

    def pytest_collectreport(self, report, _audit=_audit):
        _audit("pytest_launcher.collectreport", report)

    def pytest_runtest_logstart(self, nodeid, _audit=_audit):
        _audit("pytest_launcher.runtest_logstart", nodeid)

    def pytest_runtest_call(self, item, _audit=_audit):
        _audit("pytest_launcher.runtest_call", item, None)
        outcome = yield
        _audit("pytest_launcher.runtest_call", item, outcome)

    def pytest_runtest_makereport(self, item, call, _audit=_audit):
        outcome = yield
        _audit("pytest_launcher.runtest_makereport", item, outcome)

    def pytest_runtest_logreport(self, report, _audit=_audit):
        _audit("pytest_launcher.runtest_logreport", report)

    def pytest_pyfunc_call(self, pyfuncitem, _audit=_audit):
        found = []  # pytest's own pytest_pyfunc_call, and the item it is handed
        _audit("pytest_launcher.pyfunc_call", pyfuncitem, found)
        if not found:
            return None
        try:
            return found[0](found[1])
        finally:
            _audit("pytest_launcher.pyfunc_done", pyfuncitem)


class _Handed:
    """The item pytest's own pytest_pyfunc_call is handed: the test's item, but its
    function (obj) the private copy (see Run.private_test)."""

    __slots__ = ("_item", "obj")

    def __getattr__(self, name):
        return getattr(self._item, name)


_seal_class(_Handed)


def _forwarder(pytest):
    """The Forwarder, its hook wrappers marked so, sealed."""
    wrapper = pytest.hookimpl(hookwrapper=True, tryfirst=True)
    for name in _WRAPPERS:
        wrapper(vars(Forwarder)[name])
    _seal_class(Forwarder)
    return Forwarder()


_WRAPPERS = ("pytest_pycollect_makemodule", "pytest_runtest_call", "pytest_runtest_makereport")
_FORWARDED = {
    "pytest_launcher." + name[len("pytest_") :]: vars(Forwarder)[name].__code__
    for name in vars(Forwarder)
    if name.startswith("pytest_")
}
_FORWARDED["pytest_launcher.pyfunc_done"] = _FORWARDED["pytest_launcher.pyfunc_call"]
_AUDITED = frozenset(_WATCHED) | frozenset(_FORWARDED)
# Forwarded events taken from anyone (the stack is not walked for these, the commonest):
# a report logged or made, a test started, a module that failed to collect can only
# lower an outcome, since a passed call counts only after a body that passed, which
# runtest_call, taken from pytest alone, says.
_UNCHECKED = frozenset(
    "pytest_launcher." + name
    for name in ("runtest_logreport", "runtest_makereport", "runtest_logstart", "collectreport")
)


class Run:
    """The run's records, reached only through the audit hook: each test's outcome by
    node id (the worst of its phases), each module that failed to collect, and what
    each test's body did.

    Report states are checked when pytest makes and logs them: a test whose call phase
    passed must have had a body that ran and raised nothing (a failure turned into a
    pass after the body ended voids the run), and a report's outcome must not change
    between being made and being logged, nor after."""

    def __init__(self, workdir, trusted_ini, provenance, found):
        self.workdir = workdir
        self.trusted_ini = trusted_ini
        self.provenance = provenance
        self.found = found
        self.integrity = None
        self.assertions = None
        self.code = None  # TrustedCode, with the grader's store
        self.tests = {}
        self.bodies = {}  # node id -> its body's outcome; "running" while it runs
        self.made = {}  # (node id, phase) -> (the report pytest made, its outcome)
        self.notes = {}  # node id -> what its assertions' strict comparisons decided
        self.outcomes = None  # pytest's Skipped and XFailed
        self.pyfunc = None  # pytest's own pytest_pyfunc_call
        self.private_spaces = []  # (globals, their private copy, as made) of the test's call
        self.start = _now_ms()

    def find(self, fact):
        if fact not in self.found and len(self.found) < _MAX_FOUND:
            self.found.append(fact)

    def trusted_code(self, path, source, kind, loading):
        """The store's compile of source, or None: compile it. `loading`: the launcher's
        loaders ask, for the file at path as they read it (only they note what it
        imports, for check_helpers, and that it was looked up)."""
        if self.code is None:
            return None
        try:
            return self.code.lookup(path, source, kind, loading)
        except Exception:
            return None

    def load_initial_conftests(self, early_config):
        """Before any conftest: pytest's hooks as its own plugins left them pinned; and
        `pythonpath` of the trusted ini, which is relative to the ini (not in the repo),
        pointed at the working dir."""
        self.integrity.pin_hooks(early_config.pluginmanager)
        self.integrity.check_collecting()
        if self.code is not None:  # a rewritten test's code depends on it
            with contextlib.suppress(Exception):
                self.code.pass_hook(early_config.getini("enable_assertion_pass_hook"))
        outcomes = sys.modules.get("_pytest.outcomes")
        self.outcomes = (outcomes.Skipped, getattr(outcomes, "XFailed", outcomes.Skipped))
        inipath = getattr(early_config, "inipath", None)
        if not self.trusted_ini or inipath is None:
            return
        base = str(inipath.parent)
        for index, entry in enumerate(sys.path):
            if _within(entry, base):
                sys.path[index] = os.path.join(self.workdir, os.path.relpath(entry, base))

    def pycollect_makemodule(self, outcome):
        """Before a file is collected as a test module (outcome None): nothing pinned
        changed since the first module (see Integrity.check_collecting). Once it is: it
        is trusted before it is imported."""
        if outcome is None:
            self.integrity.check_collecting()
            return
        module = None if outcome.excinfo is not None else outcome.get_result()
        path = getattr(module, "path", None) or getattr(module, "fspath", None)
        if path is not None:
            self.provenance.trust_tests(str(path))

    def collection_finish(self, session):
        self.integrity.check_collecting()
        self.integrity.pin_tests(session.items)

    def pyfunc_call(self, item, found):
        """pytest's own pytest_pyfunc_call and the item to hand it, its function a
        private copy (see private_test); nothing when the test is no plain function of a
        trusted module (a coroutine, a generator, a wrapper of a plugin's): pytest calls
        it as it is."""
        self.private_spaces = []
        private = self.private_test(item) if self.pyfunc is not None else None
        if private is not None:
            handed = _Handed()
            handed._item, handed.obj = item, private
            found += [self.pyfunc, handed]

    def pyfunc_done(self, item):
        """After the test's call: what it bound in its private globals (a `global`
        statement's) bound in its module too, for the tests after it."""
        spaces, self.private_spaces = self.private_spaces, []
        for namespace, private, made in spaces:
            for name, value in list(private.items()):
                if made.get(name, _ABSENT) is not value:
                    namespace[name] = value

    def private_test(self, item):
        """The test's function with a copy of its module's globals of its own, made now
        (what fixtures set up is in it), and a copy of the builtins: what the code under
        test rebinds in the module (through sys.modules, or a function's __globals__) or
        in the builtins while the test runs, the test does not look up. (The functions it
        calls keep their own: a copy of one would not be the object a parametrization or
        a registry holds.) A name pinned when collection ended that is bound to code of
        the case now is a fact, and the copy keeps the pinned value."""
        obj = getattr(item, "obj", None)
        function = _function(obj)
        if type(function) is not _FUNCTION or function.__code__.co_flags & _NOT_PLAIN:
            return None
        if not self.trusted_test_code(function):
            return None
        namespace = function.__globals__
        private = self.private_namespace(namespace)
        copy = _FUNCTION(
            function.__code__,
            private,
            function.__name__,
            function.__defaults__,
            function.__closure__,
        )
        self.private_spaces = [(namespace, private, dict(private))]
        return _METHOD(copy, obj.__self__) if type(obj) is _METHOD else copy

    def trusted_test_code(self, function):
        """Whether a function's code is the trusted tests' (a test module's, a helper's
        beside the tests, in the working dir or handed over): by its code's file, which
        no one can change unseen (not its globals' __file__, which the code under test
        can)."""
        path = function.__code__.co_filename
        if type(path) is not str:
            return False
        tests_root = self.integrity.tests_root
        if tests_root is not None and _within(path, tests_root):
            return True
        return _within(path, self.workdir) and not self.provenance.of_case(path)

    def private_namespace(self, namespace):
        """A copy of a trusted module's globals and of the builtins, for one test's call:
        a name pinned at collection's end now bound to code of the case is a fact, and
        keeps its pinned value."""
        private = dict(namespace)
        what = namespace.get("__name__")
        self.keep_pinned(private, namespace, what)
        builtin = private["__builtins__"] = self.private_builtins()
        for name in builtin.keys() & private.keys():  # a global hiding a builtin
            if name.startswith("__"):
                continue  # a module's own (__name__, __loader__, __spec__)
            bound = self.integrity.source_names.get(id(namespace))
            if (
                bound is not None
                and name not in bound
                and _value_of_case(self.provenance, private[name])
            ):
                self.find(f"{what}.{name} hides the builtin with code of the case")
                del private[name]
        if _COMPARE_NAME in private:
            private[_COMPARE_NAME] = _compare
        private[_PRIVATE_MARK] = namespace  # whose copy (a hook a test defines is its module's)
        return private

    def private_builtins(self):
        """The builtins as they are now (what a fixture replaced on purpose included),
        but any pinned one bound to code of the case: its pinned value (and a fact)."""
        namespace = vars(builtins)
        private = dict(namespace)
        self.keep_pinned(private, namespace, "builtins")
        return private

    def keep_pinned(self, private, namespace, what):
        """In a copy of a pinned namespace, each pinned name bound to code of the case
        now: a fact, and the pinned value."""
        names, values = self.integrity.pinned_names(namespace)
        now = tuple(map(private.get, names, repeat(_ABSENT)))
        if not any(map(operator.is_not, now, values)):
            return
        for name, value, current in zip(names, values, now):  # noqa: B905
            if current is not value and _value_of_case(self.provenance, current):
                self.find(f"{what}.{name} was bound to code of the case")
                private[name] = value

    def runtest_logstart(self, nodeid):
        self.bodies.pop(nodeid, None)

    def runtest_call(self, item, outcome):
        """Before the test's body (outcome None), and when it ended."""
        if outcome is None:
            self.bodies[item.nodeid] = "running"
            return
        excinfo = outcome.excinfo
        if excinfo is None:
            body = "passed"
        elif issubclass(excinfo[0], self.outcomes):
            body = "skipped"
        else:
            body = "failed"
        self.bodies[item.nodeid] = body

    def runtest_makereport(self, item, outcome):
        if outcome.excinfo is not None:
            return
        report = outcome.get_result()
        nodeid, when, state = _state(report)
        body = self.bodies.get(nodeid)
        if when == "call" and state == "passed" and body not in ("passed", "running"):
            self.find(f"{nodeid} passed, but its test body {body or 'never ran'}")
        self.made[(nodeid, when)] = (report, state)
        notes = self.assertions.notes
        if notes and state == "failed":
            self.notes.setdefault(nodeid, list(notes))
        del notes[:]

    def runtest_logreport(self, report):
        nodeid, when, state = _state(report)
        if when == "teardown":
            self.integrity.check_test(nodeid)
        made = self.made.get((nodeid, when))
        if made is not None and made[0] is report:
            if made[1] != state:
                self.find(f"the outcome of {nodeid} ({when}) changed after it was made")
        elif (  # a report pytest did not make here
            when == "call"
            and state == "passed"
            and self.bodies.get(nodeid) not in ("passed", "running")
        ):
            self.find(f"{nodeid} was reported passed, but its test body did not pass")
        self.check_tracers()
        outcome, raw = _outcome(report)
        entry = self.tests.setdefault(
            nodeid, {"name": nodeid, "outcome": "passed", "duration": 0.0, "phases": set()}
        )
        entry["phases"].add(when)
        entry["duration"] += float(getattr(report, "duration", 0.0) or 0.0) * 1000
        if _ORDER.index(outcome) > _ORDER.index(entry["outcome"]):
            entry["outcome"] = outcome
            if raw:
                entry["rawStatus"] = raw
            _describe(entry, report, self.notes.get(nodeid, ()))
        elif raw and outcome == entry["outcome"]:
            entry["rawStatus"] = raw

    def check_tracers(self):
        """No trace or profile function of the case's is installed in this thread."""
        for current in (sys.gettrace(), sys.getprofile()):
            if current is not None and self.provenance.of_case(_callable_file(current)):
                self.find("a trace or profile function of the case's is installed")

    def collectreport(self, report):
        if report.failed:
            name = report.nodeid or "(collection)"
            entry = {"name": name, "outcome": "errored", "duration": 0.0, "phases": {"call"}}
            entry["rawStatus"] = "error"
            _describe(entry, report)
            self.tests[name] = entry

    def finish(self):
        """After the run: everything pinned, and every report as it was made."""
        self.integrity.check_all()
        for (nodeid, when), (report, state) in list(self.made.items()):
            if vars(report).get("outcome") != state:
                self.find(f"the outcome of {nodeid} ({when}) changed after it was made")

    def document(self, pytest, code):
        """The CTRF document. A test whose call was never reported (only its setup and
        teardown were) did not run: it failed."""
        tests = []
        summary = {"tests": 0, "passed": 0, "failed": 0, "skipped": 0, "pending": 0, "other": 0}
        for entry in self.tests.values():
            outcome = entry.pop("outcome")
            phases = entry.pop("phases")
            if outcome == "passed" and "call" not in phases:
                outcome = "errored"
                entry["message"] = "no outcome of its call was reported"
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
        return json.dumps(document).encode("utf-8")


def _state(report):
    """(node id, phase, outcome): the last two as the report holds them (pytest 9 makes
    the node id a property)."""
    state = vars(report)
    return report.nodeid, state.get("when"), state.get("outcome")


def _write(path, data):
    """data to a temporary name, then renamed into place."""
    temporary = path + ".tmp"
    with open(temporary, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)


def _outcome(report):
    """(passed, failed, errored or skipped; pytest's own word when it differs), from the
    report's own state (not properties a class could be given)."""
    state = vars(report)
    outcome, xfail = state.get("outcome"), "wasxfail" in state
    if state.get("when") == "call":
        if outcome == "passed":
            return "passed", "xpassed" if xfail else None
        if outcome == "skipped":
            return "skipped", "xfailed" if xfail else None
        return "failed", None
    if outcome == "skipped":
        return "skipped", None
    if outcome == "passed":
        return "passed", None
    return "errored", "error"  # setup or teardown


def _describe(entry, report, notes=()):
    longrepr = getattr(report, "longrepr", None)
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        entry["message"] = str(longrepr[2])[:_MESSAGE_CHARS]
        return
    text = getattr(report, "longreprtext", "") or ""
    if not text:
        return
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = getattr(crash, "message", None) or text.strip().splitlines()[-1]
    if notes:
        message = f"{'; '.join(notes)}: {message}"
    entry["message"] = message[:_MESSAGE_CHARS]
    entry["trace"] = text[-_TRACE_CHARS:]


def _now_ms():
    return int(time.time() * 1000)


def _exit_now(code):
    """End the process with its report written: without the interpreter's teardown
    (freeing every object of the run one by one, a third of a second on a large suite),
    and so without running anything the code under test left for the exit (an atexit
    function, a non-daemon thread waited for); only what was printed is flushed."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a stream the case replaced or closed
            stream.flush()
    _os_exit(code)


def _private_run(code):
    """Run this script's code again in a namespace of its own, with a copy of the
    builtins of its own, and run main() from there: sys.modules["__main__"] (this
    first namespace, whose functions are never called) and the builtins module are the
    case's to rewrite; nothing the launcher looks up is in them."""
    namespace = {
        "__name__": "pytest_launcher",
        "__file__": __file__,
        "__builtins__": dict(vars(builtins)),
    }
    exec(code, namespace)  # noqa: S102 (this script's own code, compiled before the case)
    return namespace["_exit_now"](namespace["main"](sys.argv[1:]))


if __name__ == "__main__":
    _private_run(sys._getframe().f_code)
