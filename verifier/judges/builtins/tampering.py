"""What `guard/no_tamper` looks for in the agent's source: the primitives with which code
under test rewrites a test run from inside the runner's process, and values that
compare equal to anything.

The code under test runs in pytest's process (or the Go test binary) and can reach
what no file guard sees: a trace function that flips each failed report as pluggy
hands it on, the frames and live objects of the runner, native code, a code object
swapped under a test, a plugin registered from the code, or a value whose `__eq__`
is always true and so passes every `assert f(x) == y`. Honest code for a task almost
never needs these, so the guard flags their plain forms in the files the agent added
or changed. The source is only parsed (Python's `ast`, a token scan for Go), never
imported or executed; a file that cannot be parsed is a fact, never an exception.

This is a tripwire, not a proof: code that spells a primitive by a computed string
(`exec` of decoded text) is beyond a static look, and is left to the runner's checks
at run time.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping, Sequence

import attrs


@attrs.frozen
class Finding:
    """One flagged use in one file (line 0: a fact about the whole file)."""

    path: str
    line: int
    what: str

    def describe(self) -> str:
        return f"{self.path}:{self.line}: {self.what}" if self.line else f"{self.path}: {self.what}"


# A dotted name (after import aliases are resolved), or any name beneath it, and why it
# is flagged. Looked up for attribute chains, imports and getattr with a constant name.
PRIMITIVES: Mapping[str, str] = {
    "sys.settrace": "installs a trace function",
    "sys.setprofile": "installs a profile function",
    "sys.monitoring": "uses the interpreter's event hooks",
    "sys._getframe": "reaches the interpreter's frames",
    "sys._current_frames": "reaches every thread's frames",
    "sys.addaudithook": "installs an audit hook",
    "threading.settrace": "installs a trace function",
    "threading.setprofile": "installs a profile function",
    "threading.settrace_all_threads": "installs a trace function",
    "threading.setprofile_all_threads": "installs a profile function",
    "gc.get_objects": "reaches every live object",
    "gc.get_referrers": "reaches the objects that refer to a value",
    "gc.get_referents": "reaches the objects a value refers to",
    "inspect.currentframe": "reaches the interpreter's frames",
    "inspect.stack": "reaches the interpreter's frames",
    "inspect.trace": "reaches the interpreter's frames",
    "inspect.getouterframes": "reaches the interpreter's frames",
    "inspect.getinnerframes": "reaches the interpreter's frames",
    "ctypes": "loads native code",
    "_ctypes": "loads native code",
    "marshal.load": "loads code objects from bytes",
    "marshal.loads": "loads code objects from bytes",
    "importlib.machinery.ExtensionFileLoader": "loads a native module",
    "imp.load_dynamic": "loads a native module",
    "_imp.create_dynamic": "loads a native module",
}
# Called, these build code or functions from code objects; named alone (an isinstance
# check) they are harmless.
CONSTRUCTORS: Mapping[str, str] = {
    "types.CodeType": "builds a code object",
    "types.FunctionType": "builds a function from a code object",
}
# Outside test code: pytest's internals and plugin machinery.
PYTEST_INTERNALS: Mapping[str, str] = {
    "_pytest": "reaches pytest's internals",
    "pluggy": "reaches pytest's plugin machinery",
    "pytest.hookimpl": "declares a pytest hook",
    "pytest.hookspec": "declares a pytest hook",
}
# Attribute names that are a primitive on whatever object they are read from.
ATTRIBUTES: Mapping[str, str] = {
    "tb_frame": "reaches a frame",
    "f_back": "reaches a frame",
    "f_locals": "reaches a frame's variables",
    "f_globals": "reaches a frame's globals",
    "f_builtins": "reaches a frame's builtins",
    "f_trace": "installs a trace function",
    "gi_frame": "reaches a frame",
    "cr_frame": "reaches a frame",
    "ag_frame": "reaches a frame",
    "settrace": "installs a trace function",
    "setprofile": "installs a profile function",
    "_getframe": "reaches the interpreter's frames",
    "_current_frames": "reaches every thread's frames",
    "get_referrers": "reaches the objects that refer to a value",
    "get_referents": "reaches the objects a value refers to",
}
PYTEST_ATTRIBUTES: Mapping[str, str] = {"pluginmanager": "reaches pytest's plugin manager"}
REPLACED_ATTRIBUTES: Mapping[str, str] = {
    "__code__": "replaces a function's code",
    "__eq__": "replaces a class's __eq__",
    "__ne__": "replaces a class's __ne__",
    "__bool__": "replaces a class's __bool__",
    "__hash__": "replaces a class's __hash__",
    "__class__": "replaces an object's class",
}
BUILTIN_TYPES = frozenset(
    {"int", "float", "complex", "str", "bytes", "bytearray", "list", "tuple", "dict", "set"}
    | {"frozenset"}
)
NATIVE_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")
_DUNDERS = ("__eq__", "__ne__", "__bool__", "__hash__")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_IMPORTERS = frozenset({"__import__", "importlib.import_module"})
_SPEC_FROM_FILE = "importlib.util.spec_from_file_location"


def is_test_code(path: str) -> bool:
    """A conftest or a test module, where pytest's hooks and internals belong. Only by
    its name: a helper in a tests dir is importable by the code under test like any
    module (and a conftest or test module the agent adds is the other guards' case)."""
    name = path.rsplit("/", 1)[-1]
    return name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py")


def python_findings(path: str, source: bytes) -> tuple[Finding, ...]:
    """The flagged uses in one Python source file, or the one fact that it cannot be
    parsed (its coding cookie honored, as the interpreter reads it)."""
    if b"\0" in source:
        return (Finding(path, 0, "is binary (a NUL byte), not Python source: cannot be checked"),)
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as error:
        where = f" (line {error.lineno}: {error.msg})" if isinstance(error, SyntaxError) else ""
        return (Finding(path, 0, f"does not parse as Python source{where}: cannot be checked"),)
    scan = _PythonScan(path, _aliases(tree), pytest_allowed=is_test_code(path))
    return scan.run(tree)


@attrs.define
class _PythonScan:
    path: str
    aliases: dict[str, str]
    pytest_allowed: bool
    found: dict[tuple[int, str], Finding] = attrs.Factory(dict)

    def run(self, tree: ast.Module) -> tuple[Finding, ...]:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.name_used(node, alias.name)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                self.name_used(node, node.module)
                for alias in node.names:
                    self.name_used(node, f"{node.module}.{alias.name}")
            elif isinstance(node, ast.Attribute):
                self.attribute(node, node.value, node.attr, node.ctx)
            elif isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, ast.ClassDef):
                self.class_body(node)
            elif isinstance(node, ast.Constant | ast.JoinedStr) and _names_memory(node):
                self.flag(node, "names a process's memory file (/proc/.../mem): writes any object")
            elif not self.pytest_allowed:
                self.pytest_hook(node)
        return tuple(sorted(self.found.values(), key=lambda found: found.line))

    def pytest_hook(self, node: ast.AST) -> None:
        """Outside the tests: a hook implementation, or plugins named for pytest to load."""
        hook = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name
        if hook and hook.startswith("pytest_"):
            self.flag(node, f"defines a pytest hook ({hook}) outside the tests")
        named = isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id
        if named == "pytest_plugins":
            self.flag(node, "names pytest plugins (pytest_plugins) outside the tests")

    def flag(self, node: ast.AST, what: str) -> None:
        line = getattr(node, "lineno", 0)
        self.found.setdefault((line, what), Finding(self.path, line, what))

    def name_used(self, node: ast.AST, dotted: str) -> bool:
        """A module or a name in one, by its full dotted name: whether it is flagged."""
        flagged = False
        for table in (PRIMITIVES, {} if self.pytest_allowed else PYTEST_INTERNALS):
            prefix = _matched_prefix(dotted, table)
            if prefix is not None:
                self.flag(node, f"{prefix}: {table[prefix]}")
                flagged = True
        return flagged

    def attribute(self, node: ast.AST, value: ast.expr, name: str, ctx: ast.expr_context) -> None:
        """`value.name`, read, written or deleted (also getattr/setattr with a constant)."""
        base = _dotted(value, self.aliases)
        named = base is not None and self.name_used(node, f"{base}.{name}")
        if name in ATTRIBUTES and not named:
            self.flag(node, f".{name}: {ATTRIBUTES[name]}")
        if name in PYTEST_ATTRIBUTES and not self.pytest_allowed:
            self.flag(node, f".{name}: {PYTEST_ATTRIBUTES[name]}")
        if name in REPLACED_ATTRIBUTES and not isinstance(ctx, ast.Load):
            self.flag(node, f".{name} assigned: {REPLACED_ATTRIBUTES[name]}")

    def call(self, node: ast.Call) -> None:
        called = _dotted(node.func, self.aliases) or ""
        if called in CONSTRUCTORS:
            self.flag(node, f"{called}(...): {CONSTRUCTORS[called]}")
        constant = _constant_text(node.args[0]) if node.args else None
        if called in _IMPORTERS and constant is not None:
            self.name_used(node, constant)
        if called == _SPEC_FROM_FILE and any(
            (_constant_text(argument) or "").endswith(NATIVE_SUFFIXES) for argument in node.args
        ):
            self.flag(node, f"{called}(...) of a native file: loads a native module")
        if called in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) >= 2:
            name = _constant_text(node.args[1])
            if name is not None:
                ctx = ast.Store() if called in ("setattr", "delattr") else ast.Load()
                self.attribute(node, node.args[0], name, ctx)

    def class_body(self, node: ast.ClassDef) -> None:
        """Dunders of a class defined by constants: equal to anything, never unequal, or
        (on a subclass of a built-in type) truth or hash fixed; a faked __class__."""
        builtin_base = next(
            (
                base
                for base in (_dotted(base, {}) for base in node.bases)
                if base is not None and base.removeprefix("builtins.") in BUILTIN_TYPES
            ),
            None,
        )
        for statement in node.body:
            for name, returned in _defined(statement):
                if name == "__class__":
                    self.flag(statement, f"class {node.name} fakes __class__ (fools isinstance)")
                    continue
                if name not in _DUNDERS or returned is None:
                    continue
                what = _constant_dunder(name, returned)
                if what is not None:
                    self.flag(statement, f"class {node.name}: {name} {what}")
                elif builtin_base is not None and returned and all(map(_is_constant, returned)):
                    self.flag(
                        statement,
                        f"class {node.name}, a subclass of {builtin_base}: {name} returns a "
                        "constant",
                    )


def _names_memory(node: ast.Constant | ast.JoinedStr) -> bool:
    """A string (or an f-string's constant parts) naming /proc/<pid>/mem or /proc/self/mem."""
    parts = [node] if isinstance(node, ast.Constant) else node.values
    text = "{}".join(
        part.value
        for part in parts
        if isinstance(part, ast.Constant) and isinstance(part.value, str)
    )
    return text.startswith("/proc/") and text.rstrip("/").endswith("/mem")


def _defined(statement: ast.stmt) -> Iterator[tuple[str, list[ast.expr] | None]]:
    """(name, the expressions it returns, or None when unknown) for what a class-body
    statement binds: a def, or a name assigned a lambda (or anything else)."""
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
        yield statement.name, list(_returns(statement))
    elif isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None:
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        value = statement.value
        returned = [value.body] if isinstance(value, ast.Lambda) else None
        for target in targets:
            if isinstance(target, ast.Name):
                yield target.id, returned


def _returns(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.expr]:
    """What each `return` of the function returns (its nested scopes left out)."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            yield node.value if node.value is not None else ast.Constant(None)
        elif not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))


def _constant_dunder(name: str, returned: Sequence[ast.expr]) -> str | None:
    """Why an __eq__ (__ne__) is always true (false): each return a constant of that
    truth, or NotImplemented, and at least one a constant."""
    wanted = {"__eq__": True, "__ne__": False}.get(name)
    if wanted is None or not any(map(_is_constant, returned)):
        return None
    if all(
        (isinstance(value, ast.Constant) and bool(value.value) is wanted)
        or (isinstance(value, ast.Name) and value.id == "NotImplemented")
        for value in returned
    ):
        return f"returns {wanted} whatever it is compared with"
    return None


def _is_constant(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant)


def _constant_text(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name it was imported as (`import sys as s`: s -> sys;
    `from importlib import machinery`: machinery -> importlib.machinery)."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _dotted(node: ast.expr, aliases: Mapping[str, str]) -> str | None:
    """The dotted name an expression spells (`s.settrace` with `import sys as s`:
    sys.settrace; `__import__("gc").get_objects`: gc.get_objects), None for others."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        head = aliases.get(node.id, node.id)
    elif isinstance(node, ast.Call) and node.args:
        imported = _constant_text(node.args[0])
        if imported is None or _dotted(node.func, aliases) not in _IMPORTERS:
            return None
        head = imported
    else:
        return None
    return ".".join([head, *reversed(names)])


def _matched_prefix(dotted: str, table: Mapping[str, str]) -> str | None:
    """The longest name of the table that dotted is or lies beneath."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in table:
            return prefix
    return None


# --- Go: a token scan ------------------------------------------------------------------

_GO_TOKEN = re.compile(
    r"""
      (?P<comment>//[^\n]*|/\*.*?\*/)
    | (?P<string>"(?:[^"\\\n]|\\.)*"|`[^`]*`|'(?:[^'\\\n]|\\.)*')
    | (?P<name>[^\W\d]\w*)
    | (?P<space>\s+)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
# test2json's frame mark, however a Go literal spells it: printed, it forges results.
_FRAME_MARK = re.compile(r"\\x16|\\026|\\u0016|\\U00000016|\x16")
_EXITS = {"os": "Exit", "syscall": "Exit", "golang.org/x/sys/unix": "Exit"}


@attrs.frozen
class _Token:
    kind: str
    text: str
    line: int


def go_findings(path: str, source: bytes) -> tuple[Finding, ...]:
    """The flagged uses in one Go file: an exit in `init` (before any test runs) or in
    `TestMain` before its tests run, test2json's frame mark in a literal, and
    `//go:linkname` (another package's internals, the testing package's included)."""
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError:
        return (Finding(path, 0, "is not UTF-8, so not Go source: cannot be checked"),)
    tokens = _go_tokens(text)
    if tokens is None:
        return (Finding(path, 0, "does not scan as Go source: cannot be checked"),)
    found: dict[tuple[int, str], Finding] = {}

    def flag(line: int, what: str) -> None:
        found.setdefault((line, what), Finding(path, line, what))

    for token in tokens:
        if token.kind == "comment" and token.text.startswith("//go:linkname"):
            flag(token.line, "//go:linkname: reaches another package's internals")
        if token.kind == "string" and _FRAME_MARK.search(token.text):
            flag(token.line, "test2json's frame mark (\\x16): forges go test's results")
    code = [token for token in tokens if token.kind not in ("comment", "space")]
    exits = _exit_names(code)
    for name, body in _functions(code, ("init", "TestMain")):
        runner = _first_parameter(code, body) if name == "TestMain" else None
        for at, token in enumerate(code[body.start : body.stop], body.start):
            if not _is_exit(code, at, exits):
                continue
            if name == "init":
                flag(token.line, "exits in init(), before any test runs")
            elif runner is None or not _ran_before(code, body.start, _call_end(code, at), runner):
                flag(token.line, "TestMain exits before it runs the tests")
            elif _texts(code[at + 3 : at + 6]) == ["(", "0", ")"]:
                flag(token.line, "TestMain exits 0 whatever the tests did")
    return tuple(sorted(found.values(), key=lambda finding: finding.line))


def _go_tokens(text: str) -> list[_Token] | None:
    """The tokens of a Go file, None when a comment or a literal does not end."""
    tokens, line, position = [], 1, 0
    while position < len(text):
        match = _GO_TOKEN.match(text, position)
        if match is None or match.lastgroup is None:
            return None
        kind, value = match.lastgroup, match.group()
        if kind == "other" and (value in "\"`'" or text.startswith("/*", position)):
            return None
        tokens.append(_Token(kind, value, line))
        line += value.count("\n")
        position = match.end()
    return tokens


def _texts(tokens: Sequence[_Token]) -> list[str]:
    return [token.text for token in tokens]


def _exit_names(code: Sequence[_Token]) -> dict[str, str]:
    """The package names under which the exiting packages are imported (`"os"`: os;
    `o "os"`: o; a dot import: "")."""
    names = {}
    for at, token in enumerate(code):
        if token.kind != "string" or token.text.strip('"`') not in _EXITS:
            continue
        package = token.text.strip('"`')
        before = code[at - 1] if at else None
        if before is not None and (before.kind == "name" and before.text != "import"):
            names[before.text] = _EXITS[package]
        elif before is not None and before.text == ".":
            names[""] = _EXITS[package]
        else:
            names[package.rsplit("/", 1)[-1]] = _EXITS[package]
    return names


def _is_exit(code: Sequence[_Token], at: int, exits: Mapping[str, str]) -> bool:
    """Whether a call of an exit function starts at code[at]: `os.Exit(` (or by the
    name its import gave it), `Exit(` after a dot import."""
    window = _texts(code[at : at + 4])
    if len(window) == 4 and window[1] == "." and exits.get(window[0]) == window[2]:
        return window[3] == "(" and (at == 0 or code[at - 1].text != ".")
    return (
        "" in exits
        and window[:2] == [exits[""], "("]
        and (at == 0 or code[at - 1].text not in (".", "func"))
    )


def _functions(code: Sequence[_Token], names: Sequence[str]) -> Iterator[tuple[str, slice]]:
    """(name, the slice of its body's tokens) of each top-level function named (not a
    method: `func name(`)."""
    for at in range(len(code) - 2):
        if code[at].text == "func" and code[at + 1].text in names and code[at + 2].text == "(":
            opening = next(
                (index for index in range(at + 2, len(code)) if code[index].text == "{"), None
            )
            if opening is None:
                continue
            depth = 0
            for index in range(opening, len(code)):
                depth += {"{": 1, "}": -1}.get(code[index].text, 0)
                if depth == 0:
                    yield code[at + 1].text, slice(opening + 1, index)
                    break


def _first_parameter(code: Sequence[_Token], body: slice) -> str | None:
    """TestMain's parameter name (`func TestMain(m *testing.M)`: m)."""
    at = body.start - 1
    while at > 0 and code[at].text != "TestMain":
        at -= 1
    parameter = code[at + 2] if at + 2 < len(code) else None
    return parameter.text if parameter is not None and parameter.kind == "name" else None


def _call_end(code: Sequence[_Token], at: int) -> int:
    """Where the call starting at code[at] ends: past its closing parenthesis."""
    depth = 0
    for index in range(at, len(code)):
        depth += {"(": 1, ")": -1}.get(code[index].text, 0)
        if depth == 0 and code[index].text == ")":
            return index + 1
    return len(code)


def _ran_before(code: Sequence[_Token], start: int, end: int, runner: str) -> bool:
    """Whether `runner.Run(` occurs in code[start:end] (the exit's own argument too:
    `os.Exit(m.Run())`)."""
    return any(_texts(code[at : at + 4]) == [runner, ".", "Run", "("] for at in range(start, end))
