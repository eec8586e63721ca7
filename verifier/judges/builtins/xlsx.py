"""`xlsx_cell_equals`: one cell of an Excel workbook, read with the standard library.

An .xlsx file is a zip of XML parts (ECMA-376): the workbook names its sheets and
relates each to a worksheet part; a cell holds a number, a boolean, an inline or
formula string, or an index into the shared strings. rewardkit needs openpyxl for
this; the image has no room for it, and the few parts involved are simple.

The workbook is the agent's file: its size, each part's size once inflated (a zip
bomb), and XML that declares a DTD or entities are refused as facts.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import attrs

from verifier.casefiles import read_case_file
from verifier.config import Locator
from verifier.config.fields import Text
from verifier.judges.builtins.arguments import AnyValue
from verifier.judges.builtins.data_files import json_equal
from verifier.judges.builtins.files import PathArguments
from verifier.judges.builtins.registry import (
    BuiltinContext,
    ValueWithRationale,
    argument,
    builtin,
)

if TYPE_CHECKING:
    import zipfile
    from xml.etree.ElementTree import Element

MAX_WORKBOOK_BYTES = 64 * 1024 * 1024
MAX_PART_BYTES = 128 * 1024 * 1024  # one XML part, inflated
_MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_RELATIONSHIP = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_SHOWN_CHARS = 200
_CELL_REFERENCE = re.compile(r"\$?([A-Z]{1,3})\$?([1-9][0-9]{0,6})\Z")


class WorkbookProblem(Exception):
    """What makes the workbook unreadable, in words (a fact about the case)."""


@attrs.frozen
class CellReference:
    description: str = "A1-style, e.g. B2"

    def parse(self, value: Any, at: Locator) -> str:
        if not isinstance(value, str) or not _CELL_REFERENCE.match(value.upper()):
            raise at.error(f"{value!r} must be a cell reference such as B2")
        return value.upper().replace("$", "")

    def schema(self) -> dict[str, Any]:
        return {
            "type": "string",
            "pattern": _CELL_REFERENCE.pattern,
            "description": self.description,
        }


@attrs.frozen(kw_only=True)
class XlsxCellArguments(PathArguments):
    cell: str = argument(CellReference(), required=True)
    expected: Any = argument(AnyValue(), required=True)
    sheet: str | None = argument(
        Text(non_empty=True, description="the sheet's name; default: the first")
    )


@builtin("xlsx", XlsxCellArguments)
def xlsx_cell_equals(context: BuiltinContext, arguments: XlsxCellArguments) -> ValueWithRationale:
    """The cell's value (a formula's cached result) equals `expected`: numbers by value,
    text as it is, booleans as booleans, an empty cell (none in the sheet, or one
    without a value) null."""
    import zipfile  # imported by this builtin only: start-up time

    path, cell, sheet, expected = (
        arguments.path,
        arguments.cell,
        arguments.sheet,
        arguments.expected,
    )

    found = read_case_file(context.case_dir, path, MAX_WORKBOOK_BYTES)
    if found.data is None:
        return False, f"{path} {found.problem}"
    try:
        with zipfile.ZipFile(io.BytesIO(found.data)) as workbook:
            name, part = _sheet_part(workbook, sheet)
            value = _cell_value(workbook, part, cell)
    except WorkbookProblem as problem:
        return False, f"{path} {problem}"
    except Exception as error:
        # zipfile and its decompressors raise a dozen types on a crafted file (BadZipFile,
        # zlib.error for a corrupt deflate stream, RuntimeError for an encrypted member,
        # NotImplementedError, EOFError, OSError, lzma's and bz2's errors): each is a fact
        # about the agent's file, never the judge's error.
        return False, f"{path} is not a readable .xlsx workbook: {type(error).__name__}: {error}"
    where = f"{path}: {name}!{cell}"
    if value is None:  # an empty cell equals `expected: null`, as openpyxl's None does
        return expected is None, f"{where} is empty, expected {expected!r}"
    equal = json_equal(value, expected)
    return equal, f"{where} is {repr(value)[:_SHOWN_CHARS]}, expected {expected!r}"


def _sheet_part(workbook: zipfile.ZipFile, wanted: str | None) -> tuple[str, str]:
    """(the sheet's name, its worksheet part's name in the zip)."""
    sheets = [
        (element.get("name", ""), element.get(_RELATIONSHIP, ""))
        for element in _elements(workbook, "xl/workbook.xml", f"{_MAIN}sheet")
    ]
    if not sheets:
        raise WorkbookProblem("has no sheets")
    chosen = next((s for s in sheets if s[0] == wanted), None) if wanted else sheets[0]
    if chosen is None:
        names = ", ".join(repr(name) for name, _ in sheets)
        raise WorkbookProblem(f"has no sheet {wanted!r} (it has {names})")
    targets = {
        element.get("Id"): element.get("Target", "")
        for element in _elements(workbook, "xl/_rels/workbook.xml.rels", None)
        if element.tag.endswith("Relationship")
    }
    target = targets.get(chosen[1])
    if not target:
        raise WorkbookProblem(f"relates sheet {chosen[0]!r} to no worksheet")
    part = target.lstrip("/") if target.startswith("/") else f"xl/{target}"
    return chosen[0], part


def _cell_value(workbook: zipfile.ZipFile, part: str, reference: str) -> Any:
    for element in _elements(workbook, part, f"{_MAIN}c"):
        if element.get("r") == reference:
            return _typed(workbook, element)
    return None


def _typed(workbook: zipfile.ZipFile, cell: Element) -> Any:
    kind = cell.get("t", "n")
    if kind == "inlineStr":
        return "".join(t.text or "" for t in cell.iter(f"{_MAIN}t"))
    raw = cell.findtext(f"{_MAIN}v")
    if raw is None:
        return None
    if kind == "s":
        strings = _shared_strings(workbook)
        index = int(raw)
        if not 0 <= index < len(strings):
            raise WorkbookProblem(f"refers to shared string {index}, which does not exist")
        return strings[index]
    if kind == "b":
        return raw.strip() == "1"
    if kind in ("str", "e"):
        return raw
    number = float(raw)
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def _shared_strings(workbook: zipfile.ZipFile) -> list[str]:
    if "xl/sharedStrings.xml" not in workbook.namelist():
        return []
    return [
        "".join(t.text or "" for t in item.iter(f"{_MAIN}t"))
        for item in _elements(workbook, "xl/sharedStrings.xml", f"{_MAIN}si")
    ]


def _elements(workbook: zipfile.ZipFile, part: str, tag: str | None) -> Iterator[Element]:
    """The part's elements with this tag (every element when None), as each one ends;
    the part's inflated size is checked first and DTDs are refused."""
    try:
        info = workbook.getinfo(part)
    except KeyError:
        raise WorkbookProblem(f"has no part {part}") from None
    if info.file_size > MAX_PART_BYTES:
        raise WorkbookProblem(f"has a part {part} of {info.file_size} bytes inflated, over the cap")
    with workbook.open(info) as stream:
        data = stream.read(MAX_PART_BYTES + 1)
    if len(data) > MAX_PART_BYTES:
        raise WorkbookProblem(f"has a part {part} over {MAX_PART_BYTES} bytes inflated")
    from xml.etree.ElementTree import ParseError, iterparse

    _refuse_doctype(data, part)
    try:
        # A DOCTYPE (and so any entity) was refused above: what is left is plain XML.
        for _, element in iterparse(io.BytesIO(data), events=("end",)):  # noqa: S314
            if tag is None or element.tag == tag:
                yield element
                element.clear()  # a big sheet is walked, not kept
    except ParseError as error:
        raise WorkbookProblem(f"has a part {part} that is not valid XML: {error}") from None


def _refuse_doctype(data: bytes, part: str) -> None:
    """WorkbookProblem when the part declares a DTD, in whatever encoding it says it is in
    (UTF-16, UTF-7: a search of the bytes for "<!DOCTYPE" would miss it), before anything
    in it could be declared or expanded: expat reads it with nothing but that handler."""
    from xml.parsers import expat

    def refuse(*_: Any) -> None:
        raise WorkbookProblem(f"has a part {part} that declares a DTD (refused)")

    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    try:
        parser.Parse(data, True)
    except expat.ExpatError as error:
        raise WorkbookProblem(f"has a part {part} that is not valid XML: {error}") from None
