"""A reader for plain block YAML, the subset eval.yaml files are written in.

Importing PyYAML is a large part of a `verifier grade` (its reader and resolver
compile large regular expressions at import), and a grade runs once per RL
rollout. Most eval.yaml files use only block mappings and sequences, `|` and `>`
block scalars, one-line plain or quoted scalars, and one-line `[a, b]` lists and
`{k: v}` mappings of plain or simply quoted scalars; this module reads exactly
that and raises NotPlain for anything else (anchors, tags, multi-line plain or
quoted scalars, nested flow collections, tabs, a duplicate key, numbers and times
in YAML 1.1's other spellings), so the caller hands the text to PyYAML, which
then decides, errors included. What
it returns is what PyYAML's safe loader returns for the same text; the unit
tests hold the two side by side on every eval.yaml in the repository and on
generated documents.
"""

from __future__ import annotations

import functools
import re
from typing import Any


class NotPlain(Exception):
    """The text uses YAML beyond this reader's subset: read it with PyYAML."""


_NULLS = frozenset({"~", "null", "Null", "NULL"})
_BOOLEANS = {
    word: value
    for words, value in (("yes Yes YES true True TRUE on On ON", True),
                         ("no No NO false False FALSE off Off OFF", False))
    for word in words.split()
}  # fmt: skip
# What may not begin a plain scalar in block context (`-` is a sequence or a number's sign).
_INDICATORS = frozenset(",[]{}#&*!|>'\"%@`?:")
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?[0-9]+\.[0-9]+")
_ENTRY = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-/]*|[0-9]+)[ ]*:(?: +(.*))?")
_FLOW_ITEM = re.compile(r"[A-Za-z0-9_/][^,\[\]{}#:'\"]*|'[^']*'|\"[^\"\\]*\"")
_BLOCK_SCALAR = re.compile(r"([|>])(-?)(?: +#.*)?")
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n", "\\t": "\t"}


def load(text: str) -> Any:
    """The document PyYAML's safe loader makes of text; NotPlain when text leaves the subset."""
    if not all(map(_is_plain_character, set(text))):
        raise NotPlain("tabs, carriage returns, a BOM, unusual line breaks or control characters")
    try:
        return _Reader(text.split("\n")).document()
    except RecursionError:
        raise NotPlain("nested too deeply") from None


def _is_plain_character(character: str) -> bool:
    """Not a tab, carriage return, BOM, or what PyYAML reads as a line break or refuses as
    unprintable. (Comparisons, not a character class of these ranges: one that every
    start would compile.)"""
    code = ord(character)
    return (
        32 <= code <= 126 or code == 10 or code >= 0x10000
        or (0xA0 <= code <= 0xD7FF and code not in (0x2028, 0x2029))
        or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)
    )  # fmt: skip


def _is_sequence_entry(content: str) -> bool:
    return content == "-" or content.startswith("- ")


def _resolved_key(mapping: dict[Any, Any], key: str) -> Any:
    """key's value as a mapping key; NotPlain when mapping has it already (PyYAML then
    keeps the last, or refuses it when read strictly)."""
    resolved = resolve(key)
    if resolved in mapping:
        raise NotPlain("a duplicate key")
    return resolved


def resolve(scalar: str) -> Any:
    """A plain scalar's value, as PyYAML's YAML 1.1 resolver reads it."""
    if scalar in _NULLS:
        return None
    if scalar in _BOOLEANS:
        return _BOOLEANS[scalar]
    if _is_sequence_entry(scalar):
        raise NotPlain("a sequence entry where a scalar should be")
    first = scalar[0]
    if first in "-+.0123456789":
        if _INT.fullmatch(scalar) and len(scalar) < 4000:  # int() refuses more digits
            return int(scalar)
        if _FLOAT.fullmatch(scalar):
            return float(scalar)
        if _number_or_time().fullmatch(scalar):
            raise NotPlain(f"a number or time PyYAML reads its own way: {scalar!r}")
        return scalar
    if first in _INDICATORS or scalar in ("<<", "="):
        raise NotPlain(f"a plain scalar beginning with {first!r}")
    return scalar


@functools.cache
def _number_or_time() -> re.Pattern[str]:
    """PyYAML's float, int and timestamp patterns (yaml/resolver.py), compiled when first
    needed: a plain scalar matching none of them is a string."""
    return re.compile(
        r"""[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
        |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
        |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN)
        |[-+]?0b[0-1_]+
        |[-+]?0[0-7_]+
        |[-+]?(?:0|[1-9][0-9_]*)
        |[-+]?0x[0-9a-fA-F_]+
        |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+
        |[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
        |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
         (?:[Tt]|[ \t]+)[0-9][0-9]?
         :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
         (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?""",
        re.X,
    )


class _Reader:
    """Block structure by indentation, one line at a time."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.index = 0

    def document(self) -> Any:
        line = self._peek()
        if line is not None and line[1] == "---":
            self.index += 1
            line = self._peek()
        if line is None:
            return None
        value = self._block(line)
        if self._peek() is not None:
            raise NotPlain("more after the document's top-level block")
        return value

    def _peek(self) -> tuple[int, str] | None:
        """(indent, content) of the next line that is not blank or a comment; None at the end."""
        while self.index < len(self.lines):
            line = self.lines[self.index]
            content = line.lstrip(" ")
            if content and not content.startswith("#"):
                return len(line) - len(content), content.rstrip(" ")
            self.index += 1
        return None

    def _next_at(self, indent: int) -> str | None:
        """The next line's content if it continues the block at indent; None when the block
        ended (a less indented line, or the end)."""
        line = self._peek()
        if line is None or line[0] < indent:
            return None
        if line[0] > indent:
            raise NotPlain("a line indented deeper than its block")
        return line[1]

    def _mapping(self, indent: int, first: str | None = None) -> dict[Any, Any]:
        """The mapping at indent; `first` is its first entry when it follows `- ` on a
        sequence's line."""
        mapping: dict[Any, Any] = {}
        content = self._next_at(indent) if first is None else first
        while content is not None:
            match = _ENTRY.fullmatch(content)
            if match is None:
                raise NotPlain("a line in a mapping that is not a plain `key: value`")
            key = _resolved_key(mapping, match[1])
            self.index += 1
            mapping[key] = self._value(match[2] or "", indent, in_mapping=True)
            content = self._next_at(indent)
        return mapping

    def _sequence(self, indent: int) -> list[Any]:
        sequence: list[Any] = []
        while True:
            content = self._next_at(indent)
            if content is None or not _is_sequence_entry(content):
                return sequence  # ended, or the next key of a mapping holding this sequence
            rest = content[1:].lstrip(" ")
            if _ENTRY.fullmatch(rest):
                sequence.append(self._mapping(indent + len(content) - len(rest), first=rest))
            else:
                self.index += 1
                sequence.append(self._value(rest, indent, in_mapping=False))

    def _value(self, text: str, indent: int, *, in_mapping: bool) -> Any:
        """The value after `key:` or `- ` on a line at indent (the line is consumed)."""
        if text.startswith("#"):
            text = ""
        if not text:
            line = self._peek()
            if line is None:
                return None
            if line[0] > indent:
                return self._block(line)
            if in_mapping and line[0] == indent and _is_sequence_entry(line[1]):
                return self._sequence(indent)
            return None
        header = _BLOCK_SCALAR.fullmatch(text)
        if header:
            return self._block_scalar(indent, folded=header[1] == ">", strip=bool(header[2]))
        value = _inline_scalar(text)
        line = self._peek()
        if line is not None and line[0] > indent:
            raise NotPlain("a scalar continued on the next line")
        return value

    def _block(self, line: tuple[int, str]) -> Any:
        """The mapping or sequence that begins on line (a document, or a key's value)."""
        indent, content = line
        if _is_sequence_entry(content):
            return self._sequence(indent)
        if _ENTRY.fullmatch(content):
            return self._mapping(indent)
        raise NotPlain("a scalar where a mapping or a sequence should begin")

    def _block_scalar(self, parent_indent: int, *, folded: bool, strip: bool) -> str:
        """A `|`, `|-`, `>` or `>-` scalar: its lines less their common indent, up to a less
        indented line, joined as PyYAML's scanner joins them (scan_block_scalar): a folded
        scalar joins two lines that do not begin with a space by a space (by nothing when
        blank lines lie between), every other pair by a line break; without `-`, one final
        line break is kept if the text had one after the last line."""
        lines = self.lines
        start = first = self.index
        while first < len(lines) and not lines[first]:
            first += 1
        if first == len(lines) or not lines[first].strip(" "):
            raise NotPlain("an empty block scalar, or blank lines of spaces before one")
        indent = len(lines[first]) - len(lines[first].lstrip(" "))
        if indent <= parent_indent:
            raise NotPlain("an empty block scalar")
        chunks = ["\n" * (first - start), lines[first][indent:]]
        end = last = first
        while (end := end + 1) < len(lines):
            line = lines[end]
            if line.strip(" "):
                if len(line) - len(line.lstrip(" ")) < indent:
                    break
                breaks = end - last - 1
                line = line[indent:]
                if folded and chunks[-1][:1] != " " and line[0] != " ":
                    chunks.append("\n" * breaks if breaks else " ")
                else:
                    chunks.append("\n" * (breaks + 1))
                chunks.append(line)
                last = end
            elif len(line) > indent:
                raise NotPlain("a line of spaces beyond a block scalar's indent")
        self.index = end
        if not strip and last < len(lines) - 1:
            chunks.append("\n")
        return "".join(chunks)


def _inline_scalar(text: str) -> Any:
    """A value written on one line: a plain or quoted scalar, or a flow list or mapping
    of such scalars."""
    first = text[0]
    if first == "[" or first == "{":
        close = text.find("]" if first == "[" else "}")
        if close < 0:
            raise NotPlain("a flow collection not closed on its line")
        _end_of_line(text[close + 1 :])
        inside = text[1:close].strip(" ")
        items = [item.strip(" ") for item in inside.split(",")] if inside else []
        return _flow_list(items) if first == "[" else _flow_mapping(items)
    if first == "'":
        close = text.find("'", 1)
        while close >= 0 and text[close + 1 : close + 2] == "'":
            close = text.find("'", close + 2)
        if close < 0:
            raise NotPlain("a single-quoted scalar not closed on its line")
        _end_of_line(text[close + 1 :])
        return text[1:close].replace("''", "'")
    if first == '"':
        return _double_quoted(text)
    comment = text.find(" #")
    scalar = (text if comment < 0 else text[:comment]).rstrip(" ")
    if ": " in scalar or scalar.endswith(":"):
        raise NotPlain("a plain scalar with `: ` in it")
    return resolve(scalar)


def _flow_list(items: list[str]) -> list[Any]:
    if not all(_FLOW_ITEM.fullmatch(item) for item in items):
        raise NotPlain("a flow list item beyond plain or simply quoted scalars")
    return [_inline_scalar(item) for item in items]


def _flow_mapping(items: list[str]) -> dict[Any, Any]:
    mapping: dict[Any, Any] = {}
    for item in items:
        match = _ENTRY.fullmatch(item)
        if match is None or not _FLOW_ITEM.fullmatch(match[2] or ""):
            raise NotPlain("a flow mapping item beyond `key: plain or simply quoted scalar`")
        mapping[_resolved_key(mapping, match[1])] = _inline_scalar(match[2])
    return mapping


def _double_quoted(text: str) -> str:
    """The scalar, its escapes replaced; every search moves forward, so that a line of
    a million escapes (a case's input.yaml, say) takes one pass."""
    pieces: list[str] = []
    position = 1
    quote = text.find('"', position)
    while True:
        if quote < 0:
            raise NotPlain("a double-quoted scalar not closed on its line")
        if quote < position:  # the quote found before was an escaped one
            quote = text.find('"', position)
            continue
        backslash = text.find("\\", position, quote)
        if backslash >= 0:
            escape = text[backslash : backslash + 2]
            if escape not in _ESCAPES:
                raise NotPlain(f"the escape {escape!r}")
            pieces += (text[position:backslash], _ESCAPES[escape])
            position = backslash + 2
            continue
        pieces.append(text[position:quote])
        _end_of_line(text[quote + 1 :])
        return "".join(pieces)


def _end_of_line(rest: str) -> None:
    """What follows a closed scalar must be nothing or a comment."""
    stripped = rest.lstrip(" ")
    if stripped and not (stripped.startswith("#") and len(stripped) < len(rest)):
        raise NotPlain("something after a closed scalar")
