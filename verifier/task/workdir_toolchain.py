"""The toolchain is the environment's, never the case's: a toolchain in the work dir.

Harbor grades what it collects from the agent's work dir (/app): the verifier's image
removes its own copy of that dir and the case takes its place. A toolchain installed
there (a uv or venv project's `/app/.venv` with `ENV PATH=/app/.venv/bin:$PATH`, a
`node_modules/.bin`, a GOPATH under it) is then the agent's: it can edit the test
runner the verifier would run (`.venv/lib/.../_pytest/reports.py`) and pass every
test. The grade never runs one (verifier.sandbox.plan drops PATH entries in the
case), so such a task would only error; `task init --environment` and `task import`
refuse it, naming the path and the fix (install it outside the work dir), and `task
test` checks the built image the same way.

What is read, statically, of the Dockerfile and its context (pure functions over the
parsed file, verifier.task.dockerfile):
- the final stage's ENV (a final stage FROM an earlier one inherits its ENV): PATH
  entries, and VIRTUAL_ENV, UV_PROJECT_ENVIRONMENT, GOPATH, GOBIN, ... (TOOLCHAIN_ENV)
  beneath the work dir;
- what RUN makes (in the stages the final one is built FROM, and what COPY --from
  brings over from another stage): `uv sync`/`uv run`/`uv venv`, `python -m venv`,
  `virtualenv`, `pdm install`, `poetry install` and `pipenv install` with their
  in-project settings, `npm`/`pnpm`/`yarn`/`bun install`, each in its WORKDIR (and a
  `cd` before it in the same RUN);
- the context files COPY puts in the work dir: a `pyvenv.cfg`, a `node_modules/.bin/`.
Not followed: a variable that cannot be expanded, a RUN's shell beyond `cd` and `&&`,
what a base image set (that is for `task test`, which looks at the built image).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable, Mapping

import attrs

from verifier.errors import UsageError
from verifier.sandbox.plan import beneath
from verifier.task.dockerfile import Dockerfile, Instruction, copy_arguments
from verifier.task.environment import Environment, case_files

# Variables that name where a toolchain lives (its interpreter, packages or programs).
TOOLCHAIN_ENV = (
    "VIRTUAL_ENV",
    "UV_PROJECT_ENVIRONMENT",
    "CONDA_PREFIX",
    "PYTHONHOME",
    "GOPATH",
    "GOBIN",
    "GOROOT",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "NPM_CONFIG_PREFIX",
    "PNPM_HOME",
    "BUN_INSTALL",
    "JAVA_HOME",
)
_FIXES = {
    "venv": (
        "install the venv outside {workdir}, e.g. ENV UV_PROJECT_ENVIRONMENT=/opt/venv "
        "VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH (uv sync), or python -m venv /opt/venv"
    ),
    "node": (
        "install the tools outside {workdir}, e.g. npm install --prefix /opt/node with ENV "
        "PATH=/opt/node/node_modules/.bin:$PATH NODE_PATH=/opt/node/node_modules, or npm "
        "install -g"
    ),
    "go": "set GOPATH and GOBIN outside {workdir}, e.g. ENV GOPATH=/go",
    "path": "keep the toolchain and PATH's entries outside {workdir}, e.g. in /opt or /usr/local",
}
_VAR_RE = re.compile(
    r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-+]([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))"
)
_SEPARATOR_CHARS = frozenset(";&|()")
_PYTHON_RE = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?$")
_NODE_INSTALLERS = {"npm": ("install", "i", "ci", "add"), "pnpm": ("install", "i", "add")}
_NODE_INSTALLERS |= {"bun": ("install", "i", "add"), "yarn": ("", "install", "add")}
_UV_PROJECT = ("sync", "run", "add", "remove")  # they make the project's env
_TRUE = ("1", "true", "yes", "on")
# Options of uv venv / python -m venv / virtualenv that take a value (the rest are flags).
_VALUED = frozenset(
    {"--python", "-p", "--prompt", "--index-url", "--directory", "--project", "--link-mode"}
)


@attrs.frozen
class Finding:
    """A toolchain the Dockerfile puts beneath the work dir."""

    path: str  # where, in the image
    kind: str  # venv, node, go, path: which fix applies
    source: str  # what says so, for the message

    def message(self, workdir: str) -> str:
        fix = _FIXES[self.kind].format(workdir=workdir)
        return (
            f"{self.path} ({self.source}) is in the agent's work dir {workdir}: the case "
            f"takes its place when the tests run, so the agent would control the tests' "
            f"toolchain; {fix}"
        )


@attrs.define
class _Stage:
    """A build stage as far as it is read (its state, changed as its instructions are)."""

    env: dict[str, str]
    workdir: str
    found: dict[str, Finding]  # absolute path -> what made it

    def copy(self) -> _Stage:
        return _Stage(dict(self.env), self.workdir, dict(self.found))


def refuse_toolchain_in_workdir(environment: Environment, workdir: str, label: str) -> None:
    """UsageError (exit 2) naming the first toolchain the environment puts in the agent's
    work dir and the fix; `label`: where its Dockerfile is, for the message."""
    starts_with = [file.relative.as_posix() for file in case_files(environment, workdir)]
    findings = toolchain_in_workdir(environment.dockerfile, workdir, starts_with)
    if findings:
        raise UsageError(f"{label}: {findings[0].message(workdir)}")


def toolchain_in_workdir(
    dockerfile: Dockerfile, workdir: str, case_paths: Iterable[str] = ()
) -> list[Finding]:
    """Every toolchain the image puts beneath `workdir` (module docstring), first the
    ones the final stage's ENV points at. `case_paths`: the context files COPY puts in
    the work dir, relative to it (verifier.task.environment.case_files)."""
    final = _final_stage(dockerfile)
    findings = env_findings(final.env, workdir)
    seen = {finding.path for finding in findings}
    found = [f for path, f in sorted(final.found.items()) if beneath(path, workdir)]
    found += context_findings(case_paths, workdir)
    for finding in found:
        if not any(beneath(finding.path, path) for path in seen):
            findings.append(finding)
            seen.add(finding.path)
    return findings


def env_findings(env: Mapping[str, str], workdir: str) -> list[Finding]:
    """PATH entries and TOOLCHAIN_ENV values beneath `workdir` (an image's ENV)."""
    findings = []
    for entry in env.get("PATH", "").split(":"):
        if entry.startswith("/") and beneath(entry, workdir):
            kind = "node" if "node_modules" in entry else "venv" if "venv" in entry else "path"
            findings.append(Finding(posixpath.normpath(entry), kind, "an ENV PATH entry"))
    for name in TOOLCHAIN_ENV:
        value = env.get(name, "")
        for entry in value.split(":") if name == "GOPATH" else [value]:
            if entry.startswith("/") and beneath(entry, workdir):
                findings.append(Finding(posixpath.normpath(entry), _kind_of(name), f"ENV {name}"))
    return findings


def context_findings(case_paths: Iterable[str], workdir: str) -> list[Finding]:
    """A venv (its pyvenv.cfg) or a node_modules/.bin among the context files COPY puts
    in the work dir (paths relative to it)."""
    found: dict[str, Finding] = {}
    for relative in case_paths:
        parts = relative.split("/")
        if parts[-1] == "pyvenv.cfg":
            path = posixpath.join(workdir, *parts[:-1]) if len(parts) > 1 else workdir
            found.setdefault(path, Finding(path, "venv", "a venv copied from the build context"))
        for index in range(len(parts) - 2):
            if parts[index] == "node_modules" and parts[index + 1] == ".bin":
                path = posixpath.join(workdir, *parts[: index + 2])
                found.setdefault(
                    path, Finding(path, "node", "node_modules/.bin copied from the build context")
                )
    return [found[path] for path in sorted(found)]


def _kind_of(name: str) -> str:
    if name.startswith("GO"):
        return "go"
    if name in ("NPM_CONFIG_PREFIX", "PNPM_HOME", "BUN_INSTALL"):
        return "node"
    if name in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "CONDA_PREFIX", "PYTHONHOME"):
        return "venv"
    return "path"


# --- the stages ---------------------------------------------------------------------------


def _final_stage(dockerfile: Dockerfile) -> _Stage:
    stages: dict[str, _Stage] = {}
    current = _Stage({}, "/", {})
    args: dict[str, str] = {}
    for instruction in dockerfile.instructions:
        keyword = instruction.keyword
        if keyword == "FROM":
            words = [w for w in instruction.arguments.split() if not w.startswith("--")]
            base = stages.get(words[0].lower()) if words else None
            current = base.copy() if base is not None else _Stage({}, "/", {})
            args = {}
            name = words[2].lower() if len(words) >= 3 and words[1].upper() == "AS" else None
            stages[name or str(len(stages))] = current
        elif keyword == "ARG":
            for name, value in _assignments(instruction.arguments, arg=True).items():
                args[name] = _expand(value, {**args, **current.env})
        elif keyword == "ENV":
            for name, value in _assignments(instruction.arguments).items():
                current.env[name] = _expand(value, {**args, **current.env})
        elif keyword == "WORKDIR":
            target = _expand(instruction.arguments.strip(), {**args, **current.env})
            current.workdir = posixpath.normpath(posixpath.join(current.workdir, target))
        elif keyword == "RUN":
            for path, finding in _run_findings(instruction, current, args):
                current.found.setdefault(path, finding)
        elif keyword in ("COPY", "ADD"):
            _copy_from(instruction, current, stages, args)
    return current


def _copy_from(
    instruction: Instruction, current: _Stage, stages: Mapping[str, _Stage], args: Mapping[str, str]
) -> None:
    """What COPY --from=stage brings over of that stage's toolchains."""
    parsed = copy_arguments(instruction)
    source_stage = parsed.flag("from") if parsed is not None else None
    if parsed is None or source_stage is None:
        return
    other = stages.get(source_stage.lower())
    if other is None:
        return
    variables = {**args, **current.env}
    dest = posixpath.join(current.workdir, _expand(parsed.dest, variables))
    for source in parsed.sources:
        absolute = posixpath.normpath(posixpath.join(other.workdir, _expand(source, variables)))
        for path, finding in other.found.items():
            if beneath(path, absolute):
                moved = posixpath.normpath(posixpath.join(dest, posixpath.relpath(path, absolute)))
                current.found.setdefault(
                    moved,
                    attrs.evolve(finding, path=moved, source=f"{finding.source}, COPY --from"),
                )


def _assignments(arguments: str, arg: bool = False) -> dict[str, str]:
    """ENV's (or ARG's) names and values: `K=V K2="V 2"`, or ENV's old `K V` form."""
    try:
        words = shlex.split(arguments, posix=True)
    except ValueError:
        return {}
    if not words:
        return {}
    if "=" not in words[0] and not arg:
        name, _, value = arguments.strip().partition(" ")
        return {name: value.strip()}
    found = {}
    for word in words:
        name, equals, value = word.partition("=")
        if equals or not arg:
            found[name] = value
    return found


def _expand(value: str, variables: Mapping[str, str]) -> str:
    """$NAME and ${NAME} (with :- and :+) from `variables`; an unknown one: ''."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        known = variables.get(name, "")
        if match.group(2) is not None:
            modifier = match.group(0)[len(name) + 2 :]
            if modifier.lstrip(":").startswith("-"):
                return known or match.group(2)
            return match.group(2) if known else ""
        return known

    return _VAR_RE.sub(replace, value)


# --- what a RUN makes ---------------------------------------------------------------------


def _run_findings(
    instruction: Instruction, stage: _Stage, args: Mapping[str, str]
) -> list[tuple[str, Finding]]:
    rest = instruction.arguments
    while rest.startswith("--"):
        _, _, rest = rest.partition(" ")
        rest = rest.lstrip()
    script = "\n".join([rest, *instruction.bodies]) if instruction.bodies else rest
    variables = {**args, **stage.env}
    cwd = stage.workdir
    found = []
    for written, local in _simple_commands(script):
        env = {**variables, **local}
        words = [_expand(word, env) for word in written]
        if words and words[0] == "cd" and len(words) > 1:
            cwd = posixpath.normpath(posixpath.join(cwd, words[1]))
            continue
        made = _made_by(words, env, cwd)
        if made is not None:
            path, kind = made
            source = f"RUN {' '.join(words)[:60]}"
            found.append((path, Finding(path, kind, source)))
    return found


def _simple_commands(script: str) -> Iterable[tuple[list[str], dict[str, str]]]:
    """Each simple command of a shell script: its words and its leading assignments."""
    try:
        lexer = shlex.shlex(script.replace("\n", ";"), posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        lexer.commenters = ""
        tokens = list(lexer)
    except ValueError:
        return
    words: list[str] = []
    for token in [*tokens, ";"]:
        if set(token) <= _SEPARATOR_CHARS:
            local: dict[str, str] = {}
            while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                name, _, value = words.pop(0).partition("=")
                local[name] = value
            while words and words[0] in ("sudo", "exec", "env", "time", "command"):
                words.pop(0)
            if words:
                yield words, local
            words = []
        else:
            words.append(token)


def _made_by(words: list[str], env: Mapping[str, str], cwd: str) -> tuple[str, str] | None:
    """(the toolchain dir a command makes, its kind), or None."""
    program, rest = posixpath.basename(words[0]), words[1:]
    if program == "uv" and rest:
        if rest[0] in _UV_PROJECT and "--no-project" not in rest:
            project = _option(rest, ("--directory", "--project")) or "."
            where = env.get("UV_PROJECT_ENVIRONMENT") or posixpath.join(project, ".venv")
            return posixpath.normpath(posixpath.join(cwd, project, where)), "venv"
        if rest[0] == "venv":
            return _at(cwd, _positional(rest[1:]) or ".venv"), "venv"
    if _PYTHON_RE.match(words[0]) and rest[:2] in (["-m", "venv"], ["-m", "virtualenv"]):
        target = _positional(rest[2:])
        return (_at(cwd, target), "venv") if target else None
    if program == "virtualenv":
        target = _positional(rest)
        return (_at(cwd, target), "venv") if target else None
    if program == "pdm" and rest[:1] in (["install"], ["sync"]):
        return _at(cwd, ".venv"), "venv"
    in_project = {"poetry": "POETRY_VIRTUALENVS_IN_PROJECT", "pipenv": "PIPENV_VENV_IN_PROJECT"}
    if program in in_project and rest[:1] in (["install"], ["sync"]):
        if env.get(in_project[program], "").lower() in _TRUE:
            return _at(cwd, ".venv"), "venv"
        return None
    if program in _NODE_INSTALLERS:
        command = rest[0] if rest and not rest[0].startswith("-") else ""
        if command not in _NODE_INSTALLERS[program]:
            return None
        if any(word in ("-g", "--global") for word in rest):
            return None
        prefix = _option(rest, ("--prefix", "--dir", "--cwd")) or "."
        return _at(cwd, posixpath.join(prefix, "node_modules", ".bin")), "node"
    return None


def _at(cwd: str, path: str) -> str:
    return posixpath.normpath(posixpath.join(cwd, path))


def _option(words: list[str], names: tuple[str, ...]) -> str | None:
    for index, word in enumerate(words):
        name, equals, value = word.partition("=")
        if name in names:
            if equals:
                return value
            return words[index + 1] if index + 1 < len(words) else None
    return None


def _positional(words: list[str]) -> str | None:
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            skip = word in _VALUED
            continue
        return word
    return None


# --- the built image (`task test`) --------------------------------------------------------

# Run by sh in a container of the environment's image: its variables, then where each
# usual program of a toolchain resolves (the path PATH finds, and its target).
PROBE_PROGRAMS = ("python3", "python", "pytest", "pip", "uv", "go", "node", "npm", "npx")
IMAGE_PROBE = (
    "env; "
    f"for p in {' '.join(PROBE_PROGRAMS)}; do "
    'w=$(command -v "$p") || continue; '
    'r=$(readlink -f "$w" 2>/dev/null) || r=$w; '
    'printf "\\tprogram\\t%s\\t%s\\t%s\\n" "$p" "$w" "$r"; done'
)


def probe_findings(output: str, workdir: str) -> list[Finding]:
    """The toolchains IMAGE_PROBE's `output` shows beneath `workdir`: its PATH and
    TOOLCHAIN_ENV entries, and the programs PATH finds there (or whose links lead there)."""
    env: dict[str, str] = {}
    programs: list[tuple[str, str, str]] = []
    for line in output.splitlines():
        if line.startswith("\tprogram\t"):
            fields = line.split("\t")[2:]
            if len(fields) == 3:
                programs.append((fields[0], fields[1], fields[2]))
        elif "=" in line:
            name, _, value = line.partition("=")
            env[name] = value
    findings = env_findings(env, workdir)
    for program, found, target in programs:
        for path in dict.fromkeys((found, target)):
            if path.startswith("/") and beneath(path, workdir):
                kind = (
                    "node"
                    if program in ("node", "npm", "npx")
                    else "go"
                    if program == "go"
                    else "venv"
                )
                source = f"where the image's PATH finds {program}"
                findings.append(Finding(posixpath.normpath(path), kind, source))
                break
    return findings
