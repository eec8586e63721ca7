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

The code under test runs in this process, so it could rewrite pytest from inside (the
well-known tricks: register a plugin that turns failures into passes, patch TestReport
or the runner, add an implementation to a hook, swap a test's code). Integrity pins,
before any code of the case runs, what the outcomes rest on: the functions (their
code, defaults and closures), classes and modules of pytest, pluggy, the author's
plugins and this script, the builtins and the standard modules the report is written
with; before the first conftest, pluggy's hook callers and implementations; when
collection ends, each collected test's function and the callables bound in the test
modules, and the helpers they imported from beside them checked (check_helpers).
When each test is torn down (what honest tests monkeypatch is restored by then) it
checks pytest's core, the hooks and that test; after the run, all of it. A hook
implemented by anything but pytest, pluggy, a plugin, a module installed in the
toolchain, a conftest, a test module, or a module a conftest's or test module's
`pytest_plugins` names (each defined in the source of a file there before the run), or
any pinned object that changed, voids the run: no report is written, the facts go to
stderr after TAMPERED_MARK and the exit is TAMPERED, which the grader counts as a
failure. This raises the bar; it is no proof: code written against this very script
(its records, its signing key in the interpreter's memory), standard or installed
modules the tests use rewritten before they use them, and values that compare equal to
anything remain (docs/builtins.md, "Limits").

What it cannot stop, and the recommended gate's guards must: a `conftest.py` (pytest
imports it as a plugin).

`--probe`: the same imports and pytest arguments in an empty dir, collecting nothing.
Exit 0 when the toolchain can run the tests at all; else PROBE_FAILED, with the reason
on stderr. The grader runs it only when the real run left no usable report, to tell a
fault of the toolchain (an error) from what the case did (a failure).
"""

import ast
import builtins
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
import types

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
    pytest_args = _fresh_rewrite_cache(pytest_args)
    found = []
    integrity = Integrity(workdir, plugins, found)
    reporter = Reporter(workdir, bool(options["ini"]), signer, integrity)
    report = os.path.join(os.environ["VERIFIER_RESULTS"], options["report"])
    # Taken before the case runs: what it may rebind later is checked, never called.
    check, write, say = integrity.check_all, reporter.write, os.write
    own = (check.__func__.__code__, write.__func__.__code__)
    sys.meta_path.append(_CaseRoot(workdir))
    code = pytest.main([*fixed, *pytest_args], plugins=[reporter, *plugins])
    check()
    if check.__func__.__code__ is not own[0] or write.__func__.__code__ is not own[1]:
        found.append("the launcher's own checks were rewritten")
    if found:  # nothing the case could have rebound writes it: the facts go to stderr
        say(2, ("\n" + TAMPERED_MARK + "; ".join(found[:_MAX_FOUND]) + "\n").encode())
        return TAMPERED
    write(report, pytest, code)
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


class Integrity:
    """What the outcomes and the report rest on, pinned by identity before any code of
    the case runs; checked at each test's report and after the run. `found` says what
    changed (each fact once): any of it voids the run.

    Every comparison is by identity and every type test exact (`type(x) is ...`), so
    that no object of the case is asked anything (an `__eq__` or a `__class__` could
    lie)."""

    def __init__(self, workdir, plugins, found):
        self.workdir = workdir
        self.started = time.time_ns()  # what was written after this, the case wrote
        self.found = found
        # (what, namespace, name, value), (what, function, its code, defaults, kwdefaults,
        # closure cells' contents), (what, object, its type, its mro): checked when each
        # test is torn down (index 0: pytest's core and hooks, this script; what honest
        # tests monkeypatch is restored by then) or after the run alone (1: the rest, such
        # as builtins and the test modules).
        self.bindings = ([], [])
        self.functions = ([], [])
        self.objects = ([], [])
        self.trusted = set()  # ids of the pinned functions (kept alive): trusted hooks
        self.impls = []  # (hook, implementation, its function) before any conftest
        self.impl_ids = set()
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
                self.bind("builtins", namespace, name, value, False)

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
            self.pin_namespace(f"test module {module.__name__}", vars(module), False)
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
        if top == self.workdir or not _within(top, self.workdir):
            return  # tests at the repo's root: no telling their helpers from the code
        for name, bound in _imports(path, vars(module).get("__package__")):
            helper = _helper_file(base, name)
            if helper is None or not _within(helper, top):
                continue
            found = sys.modules.get(name)
            origin = vars(found).get("__file__") if type(found) is _MODULE else None
            if origin != helper and not self.installed(origin):
                self.find(f"{module.__name__} imported {name}, which is not {helper}")
            elif origin == helper and bound in _definitions(helper):
                value = vars(module).get(bound)
                if not _defined_in(value, helper, name):
                    self.find(f"{module.__name__}.{bound} is not the one {name} defines")

    def installed(self, path):
        """A file of the toolchain: outside the repo, there before the run."""
        return type(path) is str and not _within(path, self.workdir) and self.existed(path)

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

    def check_hooks(self, ended):
        """Each implementation of each hook: pytest's own as pinned, and any later one
        pytest's, pluggy's, a plugin's, a conftest's or a declared plugin module's."""
        if self.relay is None:
            return
        present = set()
        for name, caller in list(vars(self.relay).items()):
            if type(caller) not in self.kinds[0]:
                self.find(f"pytest's hook {name} was replaced")
                continue
            for implementation in caller.get_hookimpls():
                present.add(id(implementation))
                if id(implementation) in self.impl_ids:
                    continue
                if type(implementation) not in self.kinds[1] or not self.trusted_hook(
                    implementation.function
                ):
                    self.find(
                        f"pytest's hook {name} has an implementation the code of the "
                        f"case added ({_plugin_name(implementation)})"
                    )
        for name, implementation, function in self.impls:
            if implementation.function is not function:
                self.find(f"an implementation of pytest's hook {name} was replaced")
            elif not ended and id(implementation) not in present:
                self.find(
                    f"an implementation of pytest's hook {name} was removed "
                    f"({_plugin_name(implementation)})"
                )

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


def _imports(path, package):
    """(module, name bound from it or None) of each import at a module's top level."""
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return []
    found = []
    for node in tree.body:
        if type(node) is ast.Import:
            found += [(alias.name, None) for alias in node.names]
        elif type(node) is ast.ImportFrom and node.module:
            name = node.module
            if node.level:  # relative: within the test module's package
                parts = package.split(".") if type(package) is str and package else []
                if node.level - 1 > len(parts) or not parts:
                    continue
                name = ".".join([*parts[: len(parts) - node.level + 1], node.module])
            found += [(name, alias.asname or alias.name) for alias in node.names]
    return found


def _definitions(path):
    """The names a module's source defines at its top level (def and class)."""
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return set()
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {node.name for node in tree.body if type(node) in kinds}


def _defined_in(value, path, name):
    """A function compiled from path (through the __wrapped__ of its decorators), or a
    class of the module name."""
    if issubclass(type(value), type):
        return value.__dict__.get("__module__") == name
    for _ in range(10):
        function = _function(value)
        if type(function) is not _FUNCTION:
            return False
        if function.__code__.co_filename == path:
            return True
        value = vars(function).get("__wrapped__")
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


class Reporter:
    """A pytest plugin: each test's outcome by node id (the worst of its phases), each
    module that failed to collect, then the report in CTRF."""

    def __init__(self, workdir, trusted_ini, signer, integrity):
        self.workdir = workdir
        self.trusted_ini = trusted_ini
        self.signer = signer
        self.integrity = integrity
        self.tests = {}
        self.start = _now_ms()

    def pytest_load_initial_conftests(self, early_config):
        """Before any conftest: pytest's hooks as its own plugins left them pinned; and
        `pythonpath` of the trusted ini, which is relative to the ini (not in the repo),
        pointed at the working dir."""
        self.integrity.pin_hooks(early_config.pluginmanager)
        inipath = getattr(early_config, "inipath", None)
        if not self.trusted_ini or inipath is None:
            return
        base = str(inipath.parent)
        for index, entry in enumerate(sys.path):
            if _within(entry, base):
                sys.path[index] = os.path.join(self.workdir, os.path.relpath(entry, base))

    def pytest_collection_finish(self, session):
        self.integrity.pin_tests(session.items)

    def pytest_runtest_logreport(self, report):
        if report.when == "teardown":
            self.integrity.check_test(report.nodeid)
        outcome, raw = _outcome(report)
        entry = self.tests.setdefault(
            report.nodeid, {"name": report.nodeid, "outcome": "passed", "duration": 0.0}
        )
        entry["duration"] += float(getattr(report, "duration", 0.0) or 0.0) * 1000
        if _ORDER.index(outcome) > _ORDER.index(entry["outcome"]):
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
