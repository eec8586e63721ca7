"""Builtins over the case's files: existence, contents, regex matches."""

from __future__ import annotations

import re

from verifier.case import resolve_inside
from verifier.config import Key
from verifier.config.fields import Flag, Text
from verifier.judges.builtins.fields import CasePath, Pattern
from verifier.judges.builtins.registry import BuiltinContext, ValueWithRationale, builtin

PATH = Key("path", CasePath(), required=True)


def text_of(context: BuiltinContext, path: str) -> str | None:
    target = resolve_inside(context.case_dir, path)
    if target is None or not target.is_file():
        return None
    return target.read_text(encoding="utf-8", errors="replace")


@builtin("files", PATH)
def file_exists(context: BuiltinContext, path: str) -> ValueWithRationale:
    target = resolve_inside(context.case_dir, path)
    if target is None:
        return False, f"{path} leaves the case dir"
    return target.exists(), f"{path} {'exists' if target.exists() else 'does not exist'}"


@builtin(
    "files",
    PATH,
    Key("text", Text(), required=True),
    Key("ignore_case", Flag(), default=False),
)
def file_contains(
    context: BuiltinContext, path: str, text: str, ignore_case: bool
) -> ValueWithRationale:
    content = text_of(context, path)
    if content is None:
        return False, f"{path} is not a file in the case"
    found = text.lower() in content.lower() if ignore_case else text in content
    return found, f"{path} {'contains' if found else 'does not contain'} {text!r}"


@builtin("files", PATH, Key("pattern", Pattern(), required=True))
def file_matches(context: BuiltinContext, path: str, pattern: str) -> ValueWithRationale:
    content = text_of(context, path)
    if content is None:
        return False, f"{path} is not a file in the case"
    match = re.search(pattern, content, re.MULTILINE)
    if match is None:
        return False, f"{path} has no match for /{pattern}/"
    return True, f"{path} matches /{pattern}/ at {match.group(0)[:200]!r}"
