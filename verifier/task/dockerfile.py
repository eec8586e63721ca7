"""A task environment's Dockerfile, read well enough to build the verifier's image from it.

`verifier task init --environment DIR` builds the package's verifier image from the
same Dockerfile as the agent's (verifier.task.environment), but Harbor builds it with
tests/ as the context, where DIR's files sit under environment/. So every instruction
that reads the build context is rewritten to read there: COPY and ADD without
`--from` (URLs and heredocs aside), RUN's bind mounts without `from`. Everything
else is kept as written, line for line. The .dockerignore of DIR is mapped the same
way (its patterns prefixed), which keeps its meaning exactly: Docker anchors every
pattern at the context root.

It also says where the context's files land in the final image (for `--protect`:
the trusted copies of the agent's files are the context files COPY puts in its work
dir), following WORKDIR and a final stage built FROM an earlier one.

The syntax read: parser directives (escape), comments, line continuations, heredocs
(`<<EOF`, `<<-EOF`, quoted), JSON and shell forms, flags.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
from collections.abc import Iterable, Sequence

import attrs

from verifier.errors import UsageError

_DIRECTIVE_RE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9_-]*)\s*=\s*(.*?)\s*$")
_HEREDOC_RE = re.compile(r"<<(-?)\s*([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")
_URL_RE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|git@)", re.IGNORECASE)
_ARCHIVE_RE = re.compile(r"\.(?:tar|tar\.\w+|tgz|tbz2?|txz)$")
_CONTEXT_READERS = ("COPY", "ADD")


@attrs.frozen
class Instruction:
    """One instruction as written (its lines, heredoc bodies included) and as read."""

    keyword: str  # upper case: FROM, COPY, RUN ...
    arguments: str  # after the keyword: continuations joined, comment lines left out
    lines: tuple[str, ...]
    head_lines: int  # of `lines`, those of the instruction itself; the rest: heredoc bodies

    @property
    def bodies(self) -> list[str]:
        return list(self.lines[self.head_lines :])


@attrs.frozen
class Dockerfile:
    """The file as a sequence of items: an Instruction, or a line kept as it is."""

    items: tuple[Instruction | str, ...]
    escape: str

    @property
    def instructions(self) -> tuple[Instruction, ...]:
        return tuple(item for item in self.items if isinstance(item, Instruction))


def parse_dockerfile(text: str, where: str) -> Dockerfile:
    """The instructions of a Dockerfile; UsageError (naming `where`) when it has none."""
    lines = text.splitlines()
    escape, position = "\\", 0
    items: list[Instruction | str] = []
    while position < len(lines):  # parser directives: only before anything else
        match = _DIRECTIVE_RE.match(lines[position])
        if not match:
            break
        if match.group(1).lower() == "escape" and match.group(2) in ("\\", "`"):
            escape = match.group(2)
        items.append(lines[position])
        position += 1
    while position < len(lines):
        line = lines[position]
        if not line.strip() or line.lstrip().startswith("#"):
            items.append(line)
            position += 1
            continue
        taken, pieces = [line], []
        while True:
            stripped = taken[-1].rstrip()
            if not stripped.endswith(escape):
                pieces.append(taken[-1])
                break
            pieces.append(stripped[:-1])
            position += 1
            while position < len(lines) and (
                not lines[position].strip() or lines[position].lstrip().startswith("#")
            ):
                taken.append(lines[position])  # kept as written; not part of the value
                position += 1
            if position >= len(lines):
                break
            taken.append(lines[position])
        position += 1
        logical = "".join(pieces).strip()
        keyword, _, arguments = logical.partition(" ")
        keyword = keyword.upper()
        heredocs = _HEREDOC_RE.findall(arguments) if keyword in ("RUN", "COPY", "ADD") else []
        head_lines = len(taken)
        for dash, _, delimiter in heredocs:
            while position < len(lines):
                body = lines[position]
                taken.append(body)
                position += 1
                if (body.lstrip("\t") if dash else body) == delimiter:
                    break
        items.append(Instruction(keyword, arguments.strip(), tuple(taken), head_lines))
    dockerfile = Dockerfile(tuple(items), escape)
    if not any(i.keyword == "FROM" for i in dockerfile.instructions):
        raise UsageError(f"{where}: no FROM instruction: not a Dockerfile")
    return dockerfile


@attrs.frozen
class CopyArguments:
    flags: tuple[str, ...]  # `--chown=1:1`, `--link` ...
    sources: tuple[str, ...]
    dest: str
    json_form: bool

    def flag(self, name: str) -> str | None:
        for flag in self.flags:
            key, _, value = flag.partition("=")
            if key == f"--{name}":
                return value
        return None


def copy_arguments(instruction: Instruction) -> CopyArguments | None:
    """COPY/ADD's flags, sources and destination (None when it has fewer than two)."""
    rest = instruction.arguments
    flags = []
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        flags.append(flag)
        rest = rest.lstrip()
    json_form = rest.startswith("[")
    if json_form:
        try:
            parts = json.loads(rest)
        except ValueError:
            parts = None
        if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
            json_form, parts = False, rest.split()
    else:
        parts = rest.split()
    if len(parts) < 2:
        return None
    return CopyArguments(tuple(flags), tuple(parts[:-1]), parts[-1], json_form)


def reads_context(source: str, keyword: str) -> bool:
    """Whether a COPY/ADD source names a path of the build context."""
    return not source.startswith("<<") and not (keyword == "ADD" and _URL_RE.match(source))


def context_path(source: str) -> str:
    """A source as a path relative to the context root ('' for the root itself)."""
    cleaned = posixpath.normpath("/" + source).lstrip("/")
    return "" if cleaned == "." else cleaned


def relocate(dockerfile: Dockerfile, prefix: str) -> str:
    """The Dockerfile with every read of the build context moved under `prefix`/."""
    out: list[str] = []
    for item in dockerfile.items:
        if isinstance(item, str):
            out.append(item)
            continue
        rewritten = _relocated(item, prefix)
        out.extend(item.lines if rewritten is None else rewritten)
    return "\n".join(out) + "\n"


def _relocated(instruction: Instruction, prefix: str) -> list[str] | None:
    """The instruction's new lines, or None when it reads nothing of the context."""
    if instruction.keyword in _CONTEXT_READERS:
        parsed = copy_arguments(instruction)
        if parsed is None or parsed.flag("from") is not None:
            return None
        sources = [
            _under(prefix, source) if reads_context(source, instruction.keyword) else source
            for source in parsed.sources
        ]
        if sources == list(parsed.sources):
            return None
        head = " ".join((instruction.keyword, *parsed.flags))
        if not parsed.json_form:  # the form as written; heredoc bodies follow the line
            return [f"{head} {' '.join((*sources, parsed.dest))}", *instruction.bodies]
        return [f"{head} {json.dumps([*sources, parsed.dest])}"]
    if instruction.keyword == "RUN" and "--mount=" in instruction.arguments:
        flags, rest = [], instruction.arguments
        while rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            rest = rest.lstrip()
            if flag.startswith("--mount="):
                flag = "--mount=" + _bind_mount_under(prefix, flag.removeprefix("--mount="))
            flags.append(flag)
        head = " ".join(("RUN", *flags, rest))
        return None if head == f"RUN {instruction.arguments}" else [head, *instruction.bodies]
    return None


def _under(prefix: str, source: str) -> str:
    relative = context_path(source)
    moved = f"{prefix}/{relative}" if relative else prefix
    return moved + "/" if source.endswith("/") and relative else moved


def _bind_mount_under(prefix: str, mount: str) -> str:
    """A RUN --mount value with its source under prefix when it binds the context."""
    fields = [field.partition("=") for field in mount.split(",")]
    keys = {key: value for key, _, value in fields}
    if keys.get("type", "bind") != "bind" or "from" in keys:
        return mount
    source_key = "source" if "source" in keys else "src" if "src" in keys else None
    if source_key is None:
        return f"{mount},source={prefix}"
    return ",".join(
        f"{key}={_under(prefix, value)}" if key == source_key else f"{key}{sep}{value}"
        for key, sep, value in fields
    )


# --- where the context's files land -----------------------------------------------------


def image_paths(dockerfile: Dockerfile, context_files: Iterable[str]) -> dict[str, str]:
    """{absolute path in the final image: context path} for every context file that the
    final stage (or the stage it is built FROM) copies in, as far as the Dockerfile says:
    a destination or source with a variable, an ADDed archive or a `--parents` copy is
    not followed."""
    files = sorted(context_files)
    stages: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    workdir = "/"
    for index, instruction in enumerate(dockerfile.instructions):
        if instruction.keyword == "FROM":
            words = [w for w in instruction.arguments.split() if not w.startswith("--")]
            base = words[0].lower() if words else ""
            current = dict(stages.get(base, {}))
            workdir = "/"
            name = words[2].lower() if len(words) >= 3 and words[1].upper() == "AS" else None
            stages[name or str(len(stages))] = current
            stages[str(index)] = current
        elif instruction.keyword == "WORKDIR" and "$" not in instruction.arguments:
            workdir = posixpath.normpath(posixpath.join(workdir, instruction.arguments.strip()))
        elif instruction.keyword in _CONTEXT_READERS:
            current.update(_copied(instruction, files, workdir))
    return current


def _copied(instruction: Instruction, files: Sequence[str], workdir: str) -> dict[str, str]:
    parsed = copy_arguments(instruction)
    if parsed is None or parsed.flag("from") is not None or parsed.flag("parents") is not None:
        return {}
    if "$" in parsed.dest:
        return {}
    dest = posixpath.join(workdir, parsed.dest)
    into_dir = (
        parsed.dest.endswith(("/", "/.")) or parsed.dest in (".", "..") or len(parsed.sources) > 1
    )
    copied: dict[str, str] = {}
    for source in parsed.sources:
        if not reads_context(source, instruction.keyword) or "$" in source:
            continue
        if instruction.keyword == "ADD" and _ARCHIVE_RE.search(source):
            continue  # ADD unpacks a local archive: its members are not context files
        for context_file, relative in _matches(context_path(source), files):
            if relative is None:  # the source is this very file
                target = (
                    posixpath.join(dest, posixpath.basename(context_file)) if (into_dir) else dest
                )
            else:
                target = posixpath.join(dest, relative)
            copied[posixpath.normpath(target)] = context_file
    return copied


def _matches(pattern: str, files: Sequence[str]) -> Iterable[tuple[str, str | None]]:
    """(context file, its path relative to the matched dir, or None for a matched file)
    for a COPY source: the whole context, a dir, a file, or a glob of them."""
    if not pattern:
        return [(file, file) for file in files]
    depth = pattern.count("/") + 1
    found = []
    for file in files:
        parts = file.split("/")
        if len(parts) < depth:
            continue
        head = "/".join(parts[:depth])
        if head == pattern or _docker_glob_match(pattern, head):
            rest = "/".join(parts[depth:])
            found.append((file, rest or None))
    return found


def _docker_glob_match(pattern: str, path: str) -> bool:
    """Go's filepath.Match, which Docker uses for COPY sources: `*` and `?` do not cross
    a `/`, and a pattern matches only a path of as many components (no `**`, no match
    at any depth: not verifier.globs)."""
    if not any(char in pattern for char in "*?["):
        return False
    pattern_parts, path_parts = pattern.split("/"), path.split("/")
    return len(pattern_parts) == len(path_parts) and all(
        fnmatch.fnmatchcase(part, glob)
        for part, glob in zip(path_parts, pattern_parts, strict=True)
    )


def final_workdir(dockerfile: Dockerfile) -> str:
    """The final stage's working dir ('/' when it sets none; variables left as written)."""
    workdir = "/"
    for instruction in dockerfile.instructions:
        if instruction.keyword == "FROM":
            workdir = "/"
        elif instruction.keyword == "WORKDIR":
            workdir = posixpath.normpath(posixpath.join(workdir, instruction.arguments.strip()))
    return workdir


def final_entrypoint(dockerfile: Dockerfile) -> tuple[str, ...] | None:
    """The final stage's ENTRYPOINT as the argv it runs (the exec form's words, or
    `/bin/sh -c TEXT` for the shell form); None when the Dockerfile sets none for it
    (one a base image sets is not known here) or resets it (`ENTRYPOINT []`)."""
    stages: dict[str, tuple[str, ...] | None] = {}
    entrypoint: tuple[str, ...] | None = None
    current = ""
    for index, instruction in enumerate(dockerfile.instructions):
        if instruction.keyword == "FROM":
            words = [w for w in instruction.arguments.split() if not w.startswith("--")]
            entrypoint = stages.get(words[0].lower()) if words else None
            name = words[2].lower() if len(words) >= 3 and words[1].upper() == "AS" else None
            stages[name or str(index)] = None
            current = name or str(index)
        elif instruction.keyword == "ENTRYPOINT":
            entrypoint = _exec_form(instruction.arguments)
            stages[current] = entrypoint
    return entrypoint or None


def _exec_form(arguments: str) -> tuple[str, ...]:
    """An ENTRYPOINT's argv: a JSON array of strings, else the shell form."""
    text = arguments.strip()
    if text.startswith("["):
        try:
            words = json.loads(text)
        except ValueError:
            words = None
        if isinstance(words, list) and all(isinstance(word, str) for word in words):
            return tuple(words)
    return ("/bin/sh", "-c", text)


# --- .dockerignore ----------------------------------------------------------------------


@attrs.frozen
class IgnoreRules:
    """A .dockerignore: (exception, pattern) pairs in order; the last match decides."""

    patterns: tuple[tuple[bool, str], ...]

    def excludes(self, path: str) -> bool:
        """Whether the context file (a root-relative POSIX path) is left out of builds."""
        excluded = False
        parents = _parents(path)
        for exception, pattern in self.patterns:
            if any(_ignore_match(pattern, candidate) for candidate in parents):
                excluded = not exception
        return excluded

    def relocated(self, prefix: str) -> str:
        """The same rules for the context with these files under prefix/."""
        lines = [
            f"{'!' if exception else ''}{prefix}/{pattern}" for exception, pattern in self.patterns
        ]
        return "\n".join(lines) + "\n" if lines else ""


def parse_dockerignore(text: str) -> IgnoreRules:
    patterns = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        pattern = posixpath.normpath(line.removeprefix("!").strip()).lstrip("/")
        if pattern and pattern != ".":
            patterns.append((exception, pattern))
    return IgnoreRules(tuple(patterns))


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[: depth + 1]) for depth in range(len(parts))]


def _ignore_match(pattern: str, path: str) -> bool:
    """Docker's pattern match: `**` spans any number of dirs, `*` and `?` stay in one."""
    return re.fullmatch(_ignore_regex(pattern), path) is not None


def _ignore_regex(pattern: str) -> str:
    regex, position = "", 0
    while position < len(pattern):
        char = pattern[position]
        if pattern.startswith("**", position):
            regex += ".*"
            position += 2
            if pattern.startswith("/", position):
                regex = regex[:-2] + "(?:.*/)?"
                position += 1
            continue
        if char == "*":
            regex += "[^/]*"
        elif char == "?":
            regex += "[^/]"
        elif char == "[":
            end = pattern.find("]", position + 1)
            if end == -1:
                regex += re.escape(char)
            else:
                body = pattern[position + 1 : end].replace("\\", "\\\\")
                regex += "[" + ("^" + body[1:] if body.startswith("!") else body) + "]"
                position = end
        else:
            regex += re.escape(char)
        position += 1
    return regex
