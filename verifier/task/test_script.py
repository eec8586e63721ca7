"""A task's tests/test.sh, read for `verifier task import`: what it writes as its result,
and what it installs or downloads each time it runs.

Harbor's own templates and most published tasks install their test runner when the
test runs: `apt-get install`, `curl -LsSf https://astral.sh/uv/.../install.sh | sh`,
`pip install`, `uvx --with pytest==... pytest ...`. A verifier that grades offline,
and grades thousands of trials, should not download anything per trial; so the import
runs those lines once, when the verifier's image is built (as root, with HOME=/root,
in the order test.sh has them, from the file tests/test-time-installs.sh it writes),
and `uvx`/`uv run` are run there once with `--version` instead of their command, so that
what they fetch is in uv's cache. test.sh itself stays as it is: at test time those
lines run again and find everything there (the script's HOME starts as a copy of the
image's /root, where the installers put their tools and caches).

A line that fetches something at test time that import cannot move (a download to a
file, a git clone, a package manager run in the case's project) needs the network
when the test runs: `import` names it, and stops unless the verifier keeps the
network (`--verifier-network public`).

The reading is per logical line (continuations joined, comments dropped), by the
first word of each command of the line (after `sudo`, `env` and variable
assignments): a line is moved whole, with the lines before it that set its PATH up
(`source ~/.local/bin/env`, `export PATH=...`) repeated at build time.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import Path

import attrs

REWARD_FILES = ("reward.json", "reward.txt")  # Harbor reads reward.json first
CTRF_FILE = "ctrf.json"
_SPLIT = re.compile(r"&&|\|\||;|\|")
_PIPE_TO_SHELL = re.compile(r"\b(?:curl|wget)\b[^|]*\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b")
_FETCHERS = ("curl", "wget")
_GIT_FETCHES = ("clone", "fetch", "pull", "ls-remote", "submodule")
# What only root can do at test time (the script runs as the sandbox's user).
_ROOT_PROGRAMS = frozenset(
    {
        "useradd",
        "adduser",
        "groupadd",
        "usermod",
        "chown",
        "chroot",
        "service",
        "systemctl",
        "su",
        "runuser",
        "mount",
        "sysctl",
        "setcap",
        "iptables",
        "ip",
    }
)
_PACKAGE_MANAGERS = {
    "apt-get": ("install", "update"),
    "apt": ("install", "update"),
    "apk": ("add", "update"),
    "yum": ("install",),
    "dnf": ("install",),
    "microdnf": ("install",),
    "zypper": ("install", "in"),
}
_PIP = ("pip", "pip3")
_UV_INSTALLS = ("pip", "tool", "python")  # `uv pip install`, `uv tool install`, `uv python install`
_SETUP = re.compile(
    r"^\s*(?:source|\.)\s+\S*(?:\.local/bin/env|\.cargo/env|nvm\.sh)\S*\s*$"
    r"|^\s*export\s+PATH="
)
_UVX_VALUED = frozenset(
    {
        "-p",
        "--python",
        "-w",
        "--with",
        "--from",
        "--with-requirements",
        "--with-editable",
        "--index-url",
        "-i",
        "--extra-index-url",
        "--index",
        "--default-index",
        "--cache-dir",
        "--python-preference",
        "--constraints",
        "-c",
        "--overrides",
        "--build-constraints",
        "-b",
        "--env-file",
        "--directory",
        "--project",
        "--find-links",
        "-f",
    }
)
_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HEREDOC = re.compile(r"<<(-?)\s*([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")


@attrs.frozen
class ScriptLine:
    number: int  # of its first physical line, from 1
    text: str


@attrs.frozen
class ScriptPlan:
    """What import does about test.sh."""

    reward_files: tuple[str, ...]  # the reward files the tests write (reward.json first)
    ctrf: str | None  # the CTRF report's name in /logs/verifier, when the tests write one
    build_time: tuple[str, ...]  # the lines of tests/test-time-installs.sh (empty: none)
    moved: tuple[ScriptLine, ...]  # the lines of test.sh done at build time
    fetches: tuple[ScriptLine, ...]  # lines that still fetch at test time
    as_root: tuple[ScriptLine, ...]  # lines that need root at test time
    uses_home: bool  # the script reads what installers put in $HOME
    uses_uv: bool


def plan_script(script: Path, others: Iterable[Path] = ()) -> ScriptPlan:
    """Read test.sh (and the tests' other text files, for the reward files they name)."""
    text = script.read_text(encoding="utf-8", errors="replace")
    lines = logical_lines(text)
    build: list[str] = []
    setup: list[str] = []
    moved: list[ScriptLine] = []
    fetches: list[ScriptLine] = []
    as_root: list[ScriptLine] = []
    uses_uv = False
    for line in lines:
        if _SETUP.match(line.text):
            setup.append(line.text.strip())
            continue
        commands = [_words(part) for part in _SPLIT.split(line.text)]
        firsts = [_first(words) for words in commands]
        if any(first in ("uv", "uvx") for first, _ in firsts):
            uses_uv = True
        warm = [_warm(words) for words in commands]
        if _PIPE_TO_SHELL.search(line.text) or any(
            _installs(first, rest) for first, rest in firsts
        ):
            build += [*setup, line.text.strip()]
            setup = []
            moved.append(line)
        elif any(warm):
            build += [*setup, *(" ".join(shlex.quote(w) for w in words) for words in warm if words)]
            setup = []
            moved.append(line)
        elif any(_fetches(first, rest) for first, rest in firsts):
            fetches.append(line)
        elif any(first in _ROOT_PROGRAMS for first, _ in firsts):
            as_root.append(line)
    texts = [text] + [_read(path) for path in others]
    written = tuple(name for name in REWARD_FILES if any(name in body for body in texts))
    return ScriptPlan(
        reward_files=written or REWARD_FILES,
        ctrf=CTRF_FILE if any(CTRF_FILE in body for body in texts) else None,
        build_time=tuple(build),
        moved=tuple(moved),
        fetches=tuple(fetches),
        as_root=tuple(as_root),
        uses_home=bool(moved) or "$HOME" in text or "~/" in text,
        uses_uv=uses_uv,
    )


def logical_lines(text: str) -> list[ScriptLine]:
    """The script's commands, one per logical line: continuations joined, blank and
    comment lines dropped (a `#` inside a line is kept: it may be quoted), heredoc
    bodies left out (they are data: a program's text, not the script's commands)."""
    out: list[ScriptLine] = []
    pending: list[str] = []
    start = 0
    heredoc: tuple[str, bool] | None = None  # (its delimiter, whether tabs are stripped)
    for number, raw in enumerate(text.splitlines(), start=1):
        if heredoc is not None:
            delimiter, tabs = heredoc
            if (raw.lstrip("\t") if tabs else raw) == delimiter:
                heredoc = None
            continue
        if not pending:
            start = number
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
        if raw.rstrip().endswith("\\"):
            pending.append(raw.rstrip()[:-1])
            continue
        pending.append(raw)
        line = " ".join(part.strip() for part in pending)
        out.append(ScriptLine(start, line))
        pending = []
        match = _HEREDOC.search(line)
        if match:
            heredoc = (match.group(3), bool(match.group(1)))
    if pending:
        out.append(ScriptLine(start, " ".join(part.strip() for part in pending)))
    return out


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:  # an unbalanced quote: not a command this reads
        return []


def _first(words: list[str]) -> tuple[str | None, list[str]]:
    """The command's program (after sudo, env and assignments) and its arguments."""
    position = _program(words)
    if position >= len(words):
        return None, []
    return Path(words[position]).name, words[position + 1 :]


def _program(words: list[str]) -> int:
    position = 0
    while position < len(words) and (
        words[position] in ("sudo", "env", "exec", "then", "do", "else", "!")
        or _WORD.match(words[position])
        or (
            words[position].startswith("-")
            and position > 0
            and words[position - 1] in ("sudo", "env")
        )
    ):
        position += 1
    return position


def _fetches(first: str | None, rest: list[str]) -> bool:
    return first in _FETCHERS or (first == "git" and any(w in _GIT_FETCHES for w in rest[:3]))


def _installs(first: str | None, rest: list[str]) -> bool:
    if first in _PACKAGE_MANAGERS:
        return any(word in _PACKAGE_MANAGERS[first] for word in rest)
    if first in _PIP:
        return "install" in rest
    if first in ("python", "python3") and rest[:3] == ["-m", "pip", "install"]:
        return True
    if first == "uv" and rest[:1] and rest[0] in _UV_INSTALLS:
        return "install" in rest[:2]
    return False


def _warm(words: list[str]) -> list[str]:
    """For `uvx [options] CMD ...` (`uv tool run` too) and `uv run --with ... CMD ...`:
    the same with `--version` for CMD's arguments, which fetches and caches what it
    needs and runs nothing of the case; its variable assignments kept. [] for any
    other command."""
    first, rest = _first(words)
    if first == "uvx":
        head = ["uvx"]
    elif first == "uv" and rest[:2] == ["tool", "run"]:
        head, rest = ["uvx"], rest[2:]
    elif first == "uv" and rest[:1] == ["run"] and any(w.startswith("--with") for w in rest):
        head, rest = ["uv", "run", "--no-project"], rest[1:]
    else:
        return []
    position = 0
    while position < len(rest) and rest[position].startswith("-"):
        option = rest[position]
        position += 2 if option in _UVX_VALUED and "=" not in option else 1
    if position >= len(rest):
        return []
    assignments = [word for word in words[: _program(words)] if _WORD.match(word)]
    return [*assignments, *head, *rest[: position + 1], "--version"]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
