"""`verifier task import --hardened-runner`: a test.sh whose only grading step is pytest
over files in /tests, graded instead by the verifier's hardened runner (`runner:
pytest`, docs/builtins.md) with a trusted `tests:` list.

What counts as such a script, read per logical line (verifier.task.test_script): the
test-time installs import already moves to build time, the lines that set their PATH
up, `cd` into the work dir, `set`, `mkdir -p` and `echo` lines that write nothing but
the output, one pytest run (`pytest`, `python3 -m pytest`, `uvx ... pytest`, `uv run
--with ... pytest`) over files (or the dir) in /tests, with options that change how
it reports and nothing else, and the reward the common way: 1 when pytest exits 0,
else 0 (`if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 ...`,
or `&& echo 1 > ... || echo 0 > ...`). So the reward is `tests/all_passed`'s.

The tests must be Python files alone (test.sh aside): the hardened runner hands their
sources to the launcher and leaves nothing of them readable to the code under test, so
a test that reads a file beside it at run time would fail; and a source that names
/tests would look for them there.

The `tests:` list is read from the sources without running them (ast): each
`test*` function of a test file's top level and each `test*` method of a `Test*` class
without bases, with the ids pytest gives a `parametrize` over literal values (numbers,
strings, True/False/None, `pytest.param(..., id=...)`, `ids=[...]`). What only running
pytest could tell (a parametrize over computed values, a fixture with `params`,
`pytest_generate_tests`, a class with bases) keeps the task on its own test.sh, naming
where; so does a test the top-level defs do not show (a test name bound inside an `if`,
assigned, imported, through globals(); a name defined twice; a decorated test class):
pytest would run it, the list would leave it out, and the runner ignores unlisted
tests, so a failing one would not lower the reward.
"""

from __future__ import annotations

import ast
import itertools
import re
import shlex
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import attrs

from verifier.task.test_script import ScriptLine, ScriptPlan, logical_lines

TESTS_AT = "/tests"
RUNNER_VENV = "/opt/verifier-pytest"  # the runner's python, when test.sh ran pytest by uvx
_SPLIT = re.compile(r"&&|\|\||;")
_REWARD = re.compile(r"""^echo\s+["']?([01])["']?\s*>\s*["']?/logs/verifier/reward\.txt["']?$""")
# Harbor's template: `if [ "$PWD" = "/" ]; then echo "Error: ..."; exit 1; fi`
_NO_WORKDIR = re.compile(r"""^if\s+\[\s+"?\$PWD"?\s+(?:=|==)\s+["']?/["']?\s+\]$""")
_STATUS_TEST = re.compile(r"^(?:if|elif)\s+\[\[?\s+\"?\$\?\"?\s+(?:-eq|==|=)\s+\"?0\"?\s+\]\]?$")
_KEYWORDS = ("then", "else", "fi")
_QUIET_OPTIONS = frozenset(
    {"-v", "-vv", "-vvv", "-q", "-qq", "-s", "-x", "--exitfirst", "--no-header", "-l"}
)
_QUIET_PREFIXES = (
    "-r",
    "--tb=",
    "--color=",
    "--ctrf=",
    "--junitxml=",
    "--junit-xml=",
    "--durations=",
    "--json-report",
    "--capture=",
    "--showlocals",
)
_QUIET_VALUED = frozenset({"--ctrf", "--junitxml", "--junit-xml", "--tb", "--color"})
_PYTHON = re.compile(r"^python(?:3(?:\.\d+)?)?$")
_WITH = ("-w", "--with")
_PYTHON_OPTIONS = ("-p", "--python")
_UV_FLAGS = frozenset({"--no-project", "--isolated", "-q", "--quiet", "--offline", "--no-cache"})


@attrs.frozen
class HardenedPlan:
    """How the hardened runner takes test.sh's place."""

    executable: str  # the python that runs the launcher (pytest importable there)
    paths: tuple[str, ...]  # the test files, relative to /tests
    ids: tuple[str, ...]  # the trusted list, in the files' order
    build: tuple[str, ...]  # shell lines run at build time to make `executable` (uvx)


def plan_hardened(script: Path, tests: Path, plan: ScriptPlan, workdir: str) -> HardenedPlan | str:
    """The hardened runner's plan for test.sh, or why it cannot take its place."""
    others = sorted(
        path.relative_to(tests).as_posix()
        for path in tests.rglob("*")
        if path.is_file() and path != script and "__pycache__" not in path.parts
    )
    data = [name for name in others if not name.endswith(".py")]
    if data:
        return (
            f"tests/{data[0]} is not a Python file: the tests may read it at run time, and the "
            "hardened runner leaves nothing of the tests readable then"
        )
    for name in others:
        if TESTS_AT in (tests / name).read_text(encoding="utf-8", errors="replace"):
            return f"tests/{name} names {TESTS_AT}: it reads the tests' dir at run time"
    moved = {line.number for line in plan.moved}
    run: _PytestRun | None = None
    text = script.read_text(encoding="utf-8", errors="replace")
    for line in logical_lines(text):
        if _setup(line.text):
            continue
        for command in (part.strip() for part in _SPLIT.split(line.text)):
            found = _pytest_run(command, line)
            if isinstance(found, str):
                return found
            if found is not None:
                if run is not None:
                    return f"{script}:{line.number}: a second pytest run"
                run = found
            elif line.number not in moved and not _harmless(command, workdir):
                return f"{script}:{line.number}: `{command[:60]}` is not part of a pytest run"
    if run is None:
        return f"{script}: no pytest run over files in {TESTS_AT}"
    if plan.reward_files != ("reward.txt",):
        return f"{script}: the reward is not written as reward.txt from pytest's exit code"
    paths = run.paths or tuple(name for name in others if _is_test_file(name))
    ids: list[str] = []
    for relative in paths:
        listed = collect_ids(tests / relative, relative)
        if isinstance(listed, str):
            return listed
        ids += listed
    for conftest in (name for name in others if PurePosixPath(name).name == "conftest.py"):
        problem = _generated(tests / conftest, f"tests/{conftest}")
        if problem is not None:
            return problem
    if not ids:
        return f"{script}: no test found in {', '.join(paths) or TESTS_AT}"
    return HardenedPlan(run.executable, paths, tuple(ids), run.build)


def _setup(text: str) -> bool:
    return bool(re.match(r"^\s*(?:source|\.)\s|^\s*export\s+PATH=", text))


@attrs.frozen
class _PytestRun:
    executable: str
    paths: tuple[str, ...]
    build: tuple[str, ...]


def _pytest_run(command: str, line: ScriptLine) -> _PytestRun | str | None:
    """The pytest run `command` is (None: it is none; a str: why it cannot be taken)."""
    words = _words(command)
    for keyword in ("then", "else"):
        if words[:1] == [keyword]:
            words = words[1:]
    if not words:
        return None
    program, rest = Path(words[0]).name, words[1:]
    where = f"test.sh:{line.number}"
    if program in ("pytest", "py.test"):
        return _with_paths("python3", rest, (), where)
    if _PYTHON.match(program) and rest[:2] == ["-m", "pytest"]:
        return _with_paths(program, rest[2:], (), where)
    if program == "uvx" or (program == "uv" and rest[:2] == ["tool", "run"]):
        return _uv_run(rest if program == "uvx" else rest[2:], where)
    if program == "uv" and rest[:1] == ["run"]:
        if not any(word.split("=", 1)[0] in _WITH for word in rest):
            if "pytest" in rest:
                return f"{where}: `uv run` in the case's own project: its toolchain is the agent's"
            return None
        return _uv_run(rest[1:], where)
    if "pytest" in words:
        return f"{where}: `{command[:60]}` runs pytest in a way import does not read"
    return None


def _uv_run(words: list[str], where: str) -> _PytestRun | str | None:
    """`uvx [options] pytest ...` / `uv run --with ... pytest ...`: pytest and the
    `--with` packages installed at build time into a venv of the runner's own."""
    packages: list[str] = []
    python: str | None = None
    position = 0
    while position < len(words) and words[position].startswith("-"):
        option, _, value = words[position].partition("=")
        if option in _WITH or option in _PYTHON_OPTIONS:
            if not value:
                position += 1
                value = words[position] if position < len(words) else ""
            if option in _WITH:
                packages.append(value)
            else:
                python = value
        elif option not in _UV_FLAGS:
            return f"{where}: uv's option {option} is not one import reads"
        position += 1
    if position >= len(words):
        return None
    tool = words[position]
    name, _, version = tool.partition("@")
    if re.split(r"[=<>~!\[]", name, maxsplit=1)[0] != "pytest":
        return None
    packages.insert(0, f"pytest=={version}" if version else name)
    quoted = " ".join(shlex.quote(package) for package in packages)
    make = f"uv venv {RUNNER_VENV}" + (f" --python {shlex.quote(python)}" if python else "")
    build = (make, f"uv pip install --python {RUNNER_VENV}/bin/python {quoted}")
    return _with_paths(f"{RUNNER_VENV}/bin/python", words[position + 1 :], build, where)


def _with_paths(
    executable: str, arguments: Sequence[str], build: tuple[str, ...], where: str
) -> _PytestRun | str:
    """The run's test paths (relative to /tests), or why its arguments are not only
    files in /tests and options that change how it reports."""
    paths: list[str] = []
    skip = False
    for argument in arguments:
        if skip:
            skip = False
            continue
        if argument.startswith("-"):
            option = argument.split("=", 1)[0]
            quiet = argument in _QUIET_OPTIONS or option in _QUIET_VALUED
            if quiet or argument.startswith(_QUIET_PREFIXES):
                skip = option in _QUIET_VALUED and "=" not in argument
                continue
            if option == "-p":
                skip = True
                continue
            return f"{where}: pytest's option {argument} changes what runs or how it ends"
        if argument.startswith(("$", "`")) or argument in (">", ">>", "2>&1", "|"):
            return f"{where}: `{argument}`: import reads only plain paths in {TESTS_AT}"
        path = PurePosixPath(argument)
        if path == PurePosixPath(TESTS_AT):
            continue  # the whole dir: every test file in it
        if not path.is_relative_to(TESTS_AT) or ".." in path.parts or "::" in argument:
            return f"{where}: `{argument}` is not a file in {TESTS_AT}"
        paths.append(path.relative_to(TESTS_AT).as_posix())
    return _PytestRun(executable, tuple(paths), build)


def _harmless(command: str, workdir: str) -> bool:
    """A command of test.sh that neither tests nor writes anything but output and the
    reward from pytest's exit code."""
    words = _words(command)
    if not words:
        return True
    text = " ".join(words)
    if words[0] in _KEYWORDS:
        rest = command.strip()[len(words[0]) :].strip()
        return not rest or _harmless(rest, workdir)
    if any(pattern.match(command.strip()) for pattern in (_STATUS_TEST, _REWARD, _NO_WORKDIR)):
        return True
    if words[0] == "cd":
        return len(words) == 2 and words[1].rstrip("/") in (workdir, "$WORKDIR", "${WORKDIR}")
    if words[0] in ("set", "true", ":"):
        return True
    if words[0] == "exit":
        return True
    if words[0] == "mkdir" and all(w.startswith(("-", "/logs")) for w in words[1:]):
        return True
    return words[0] == "echo" and ">" not in text and "`" not in command and "$(" not in command


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return command.split()


def _is_test_file(name: str) -> bool:
    base = PurePosixPath(name).name
    return base.endswith(".py") and (base.startswith("test_") or base.endswith("_test.py"))


# --- the trusted list, read from the sources -----------------------------------------------


def collect_ids(path: Path, relative: str) -> list[str] | str:
    """The node ids pytest gives the tests of one file (relative to /tests), or where
    they cannot be known without running it."""
    where = f"tests/{relative}"
    try:
        tree = ast.parse(path.read_bytes(), filename=where)
    except (OSError, SyntaxError, ValueError) as error:
        return f"{where} cannot be read as Python: {error}"
    problem = (
        _generated(path, where, tree)
        or _bound_at_run_time(tree, where)
        or _bound_elsewhere(tree.body, where, "module")
    )
    if problem is not None:
        return problem
    ids: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            found = _function_ids(node, f"{relative}::{node.name}", where)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            found = _class_ids(node, relative, where)
        else:
            continue
        if isinstance(found, str):
            return found
        ids += found
    return ids


def _generated(path: Path, where: str, tree: ast.Module | None = None) -> str | None:
    """Where a module makes tests only a run can tell: pytest_generate_tests, a fixture
    with params, a module-level pytestmark that parametrizes."""
    if tree is None:
        try:
            tree = ast.parse(path.read_bytes(), filename=where)
        except (OSError, SyntaxError, ValueError) as error:
            return f"{where} cannot be read as Python: {error}"
    for node in ast.walk(tree):
        at = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.FunctionDef) and node.name == "pytest_generate_tests":
            return f"{at}: pytest_generate_tests makes tests only a run can list"
        if _fixture_with_params(node):
            return f"{at}: a fixture with params: only a run can list its tests"
        if _parametrized_module(node):
            return f"{at}: a module-wide parametrize"
    return None


_RUNTIME_BINDERS = frozenset({"globals", "locals", "vars", "exec", "eval", "setattr"})
_ANYWHERE_BINDERS = frozenset({"globals", "exec", "eval"})


def _bound_at_run_time(tree: ast.Module, where: str) -> str | None:
    """Where any function of the module may bind a test name in the module when called:
    `global test_x`, globals(), exec(), eval()."""
    for node in ast.walk(tree):
        at = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Global) and any(_test_name(name) for name in node.names):
            return f"{at}: `global` binds a test only a run can list"
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _ANYWHERE_BINDERS
        ):
            return f"{at}: {node.func.id}() may bind tests only a run can list"
    return None


def _bound_elsewhere(body: Sequence[ast.stmt], where: str, scope: str) -> str | None:
    """Where a module's (or a test class's) namespace gets a test pytest collects that
    the lister would not see, or sees one that pytest does not collect: a test* (Test*)
    name bound but by a `def` (`class`) at the top of the scope (inside an `if` or a
    `try`, by an assignment, an import, `from ... import *`, `global`, or at run time
    through globals(), setattr(), exec()), a name defined twice (pytest collects the
    last), and a class pytest leaves out (`__init__`, `__test__`)."""
    seen: set[str] = set()
    for statement in body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if statement.name in seen and _test_name(statement.name):
                return f"{where}:{statement.lineno}: {statement.name} is defined twice"
            seen.add(statement.name)
            if scope != "module" and statement.name == "__init__":
                return f"{where}:{statement.lineno}: a test class with __init__ (pytest skips it)"
            if isinstance(statement, ast.ClassDef) and statement.name.startswith("Test"):
                problem = _bound_elsewhere(statement.body, where, "class")
                if problem is not None:
                    return problem
            nodes: list[ast.AST] = [*statement.decorator_list]
        else:
            nodes = [statement]
        for node in nodes:
            problem = _binds_a_test(node, where)
            if problem is not None:
                return problem
    return None


def _binds_a_test(node: ast.AST, where: str) -> str | None:
    """What in `node` (a statement of a module's or class's top level, searched but for
    the bodies of the functions and classes it defines) binds a test name there."""
    at = f"{where}:{getattr(node, 'lineno', 0)}"
    names: list[str] = []
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        names.append(node.name)  # inside a block: pytest sees it, the lister does not
    elif isinstance(node, ast.Import | ast.ImportFrom):
        for alias in node.names:
            if alias.name == "*":
                return f"{at}: `import *` may bring tests in"
            names.append(alias.asname or alias.name.split(".")[0])
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        names.append(node.id)
    elif isinstance(node, ast.Global):
        names += node.names
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _RUNTIME_BINDERS
    ):
        return f"{at}: {node.func.id}() may bind tests only a run can list"
    for name in names:
        if _test_name(name) or name == "__test__":
            return f"{at}: {name} is bound where only a run can tell it is a test"
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
        return None  # its body is a scope of its own
    for child in ast.iter_child_nodes(node):
        problem = _binds_a_test(child, where)
        if problem is not None:
            return problem
    return None


def _test_name(name: str) -> bool:
    return name.startswith(("test", "Test"))


def _fixture_with_params(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and _dotted(node.func).endswith("fixture")
        and any(keyword.arg == "params" for keyword in node.keywords)
    )


def _parametrized_module(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Assign)
        and any(
            isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets
        )
        and "parametrize" in ast.dump(node.value)
    )


def _class_ids(node: ast.ClassDef, relative: str, where: str) -> list[str] | str:
    if node.bases or node.keywords:
        return f"{where}:{node.lineno}: class {node.name} has bases: only a run can list its tests"
    if any(_parametrize(decorator) is not None for decorator in node.decorator_list):
        return f"{where}:{node.lineno}: class {node.name} is parametrized"
    if any(".mark." not in f".{_dotted(decorator)}" for decorator in node.decorator_list):
        return f"{where}:{node.lineno}: class {node.name}'s decorator may add or drop tests"
    ids: list[str] = []
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith(
            "test"
        ):
            found = _function_ids(item, f"{relative}::{node.name}::{item.name}", where)
            if isinstance(found, str):
                return found
            ids += found
        elif isinstance(item, ast.ClassDef) and item.name.startswith("Test"):
            return f"{where}:{item.lineno}: a nested test class"
    return ids


def _function_ids(
    node: ast.FunctionDef | ast.AsyncFunctionDef, base: str, where: str
) -> list[str] | str:
    if any(_dotted(decorator).endswith("fixture") for decorator in node.decorator_list):
        return []
    parametrized: list[list[str]] = []
    for decorator in reversed(node.decorator_list):  # the nearest one's id comes first
        call = _parametrize(decorator)
        if call is None:
            continue
        values = _parametrize_ids(call)
        if values is None:
            return (
                f"{where}:{decorator.lineno}: {node.name}'s parametrize is over values only a "
                "run can name"
            )
        parametrized.append(values)
    if not parametrized:
        return [base]
    ids = ["-".join(parts) for parts in itertools.product(*parametrized)]
    if len(set(ids)) != len(ids):
        return f"{where}:{node.lineno}: {node.name}'s parametrized ids repeat"
    return [f"{base}[{test_id}]" for test_id in ids]


def _parametrize(decorator: ast.expr) -> ast.Call | None:
    if isinstance(decorator, ast.Call) and _dotted(decorator.func).endswith("mark.parametrize"):
        return decorator
    return None


def _parametrize_ids(call: ast.Call) -> list[str] | None:
    """The ids of `parametrize(names, values[, ids=...])` over literals, else None."""
    if len(call.args) < 2:
        return None
    names, values = call.args[0], call.args[1]
    keywords = {keyword.arg: keyword.value for keyword in call.keywords}
    if set(keywords) - {"ids", "indirect", "scope"} or "indirect" in keywords:
        return None
    if not isinstance(values, ast.List | ast.Tuple):
        return None
    if isinstance(names, ast.Constant) and isinstance(names.value, str):
        count = len([name for name in names.value.split(",") if name.strip()])
    elif isinstance(names, ast.List | ast.Tuple):
        count = len(names.elts)
    else:
        return None
    given = keywords.get("ids")
    if given is not None:
        if not isinstance(given, ast.List | ast.Tuple) or len(given.elts) != len(values.elts):
            return None
        texts = [_literal(element) for element in given.elts]
        if any(not isinstance(text, str) or not _plain(text) for text in texts):
            return None
        return [str(text) for text in texts]
    ids: list[str] = []
    for value in values.elts:
        own = _param_id(value, count)
        if own is None:
            return None
        ids.append(own)
    return ids


def _param_id(value: ast.expr, count: int) -> str | None:
    if isinstance(value, ast.Call) and _dotted(value.func).endswith("param"):
        named = {keyword.arg: keyword.value for keyword in value.keywords}
        if "id" in named:
            text = _literal(named["id"])
            return text if isinstance(text, str) and _plain(text) else None
        return _values_id(list(value.args), count)
    if count == 1:
        return _values_id([value], 1)
    if isinstance(value, ast.Tuple | ast.List):
        return _values_id(list(value.elts), count)
    return None


def _values_id(values: list[ast.expr], count: int) -> str | None:
    if len(values) != count:
        return None
    parts = []
    for value in values:
        literal = _literal(value)
        if isinstance(literal, str):
            if not _plain(literal):
                return None
            parts.append(literal)
        elif (literal is None and _is_none(value)) or isinstance(literal, bool | int | float):
            parts.append(str(literal))
        else:
            return None
    return "-".join(parts)


_NOT_LITERAL = object()


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _plain(text: str) -> bool:
    """A string pytest puts in an id as it is: printable ASCII, not empty."""
    return bool(text) and text.isascii() and text.isprintable()


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return ""
