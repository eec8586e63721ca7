"""Path globs as task authors write them in .gitignore files: `tests/**`, `*.pth`.

A pattern with a `/` (other than a trailing one) is anchored at the root it is
matched against; a pattern without one matches a name at any depth (`conftest.py`
is every conftest.py). `*` and `?` stay within one path component, `**` spans any
number of them, `[...]` is a character class. A trailing `/` or `/**` means
everything beneath a directory. Every glob the verifier reads is one of these, but
a Dockerfile's COPY sources, which follow Docker's own rules (task/dockerfile.py).
"""

from __future__ import annotations

import functools
import re

import attrs


@attrs.frozen
class Glob:
    pattern: str
    regex: re.Pattern[str]
    anchored: bool

    def matches(self, relative: str) -> bool:
        """Whether a root-relative POSIX path (no leading `./`) matches."""
        return self.regex.fullmatch(relative) is not None

    @property
    def base(self) -> str:
        """The literal directory every match lies under ('' when it can be anywhere)."""
        if not self.anchored:
            return ""
        literal = []
        for part in self.pattern.strip("/").split("/")[:-1]:
            if any(char in part for char in "*?["):
                break
            literal.append(part)
        return "/".join(literal)


class GlobError(ValueError):
    pass


@functools.lru_cache(maxsize=256)
def compile_glob(pattern: str) -> Glob:
    """The Glob for pattern, or GlobError saying why it is not one."""
    if not pattern or not pattern.strip("/") or "\0" in pattern:
        raise GlobError("must be a non-empty glob such as tests/** or *.pth")
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise GlobError(f"{pattern!r} must be relative, without '..'")
    body = pattern.removeprefix("./")
    if body.endswith("/"):
        body += "**"
    anchored = "/" in body
    parts = body.split("/")
    regex = "" if anchored else "(?:.*/)?"
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
        else:
            regex += _component(part, pattern) + ("" if last else "/")
    return Glob(pattern, re.compile(regex, re.DOTALL), anchored)


def _component(part: str, pattern: str) -> str:
    out = []
    index = 0
    while index < len(part):
        char = part[index]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = part.find("]", index + 2)
            if end < 0:
                raise GlobError(f"{pattern!r} has an unclosed '['")
            members = part[index + 1 : end]
            negate = members.startswith("!")
            members = members[1:] if negate else members
            out.append(f"[{'^' if negate else ''}{re.escape(members).replace(chr(92) + '-', '-')}]")
            index = end
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)
