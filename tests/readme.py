"""The commands the README shows, as the tests that keep them working read them.

A shell block (```sh or ```bash) holds commands, one a line (a line ending in `\\`
continues on the next) with `# ...` comments after them; the comment lines right
under a command are the output it prints, line for line. Console blocks (```console)
are the walkthrough's, which tests/harbor/test_readme_walkthrough.py runs.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


class Command(NamedTuple):
    section: str  # the `## ` heading it is under
    text: str  # as written, continuation lines joined
    argv: tuple[str, ...]  # shell words, comments left out
    output: tuple[str, ...]  # the comment lines under it: what it prints


class Block(NamedTuple):
    section: str
    language: str
    body: str


def blocks(text: str) -> list[Block]:
    """Every fenced block of a markdown text, with the `## ` section it is in."""
    found = []
    for match in FENCE.finditer(text):
        headings = re.findall(r"^## (.+)$", text[: match.start()], flags=re.MULTILINE)
        found.append(Block(headings[-1] if headings else "", match.group(1), match.group(2)))
    return found


def shell_commands(text: str) -> list[Command]:
    """The commands of every shell block, each with the output shown under it."""
    commands: list[Command] = []
    for block in blocks(text):
        if block.language not in ("sh", "bash"):
            continue
        joined = block.body.replace("\\\n", " ")
        for line in joined.splitlines():
            if not line.strip():
                continue
            if line.startswith("#"):
                if commands and commands[-1].section == block.section and not _is_remark(line):
                    last = commands[-1]
                    commands[-1] = last._replace(output=(*last.output, line[2:]))
                continue
            argv = tuple(shlex.split(line, comments=True))
            commands.append(Command(block.section, re.sub(r"\s+", " ", line), argv, ()))
    return commands


def _is_remark(line: str) -> bool:
    """A comment line that is no output: `#` alone, or a shebang."""
    return line.rstrip() == "#" or line.startswith("#!")


def readme_commands() -> list[Command]:
    return shell_commands(README.read_text())
