"""The report files a case holds (`report:`, a path or a glob), read and merged, or the
fact that stops them: too many, too large, unlisted, stale (left as they were by the
command that should have written them), or unparsable. Every read goes through
verifier.casefiles, so nothing the case left is followed out of it."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from verifier.casefiles import list_case, read_case_file, resolve_inside
from verifier.globs import Glob
from verifier.judges.builtins.files import MAX_FILE_BYTES
from verifier.judges.builtins.rationales import cut, listed
from verifier.judges.builtins.reports import Reading, ReportError, merge, parse_report

MAX_REPORTS = 1000  # files one glob may match
MAX_TOTAL_BYTES = 64 * 1024 * 1024  # read across them

Identity = tuple[int, int, int]  # a file's (inode, size, mtime_ns): changed when rewritten


def read_reports(
    root: Path,
    location: str | Glob,
    report_format: str | None,
    existing: Mapping[str, Identity] | None = None,
) -> Reading:
    """The reports at location under root, merged, or the fact that stops them.

    `existing`: the identities of reports before a command ran; those unchanged since
    are stale (a lone path is then unusable; a glob leaves them out)."""
    found, problem = matching_files(root, location)
    if problem is not None:
        return Reading(None, (), problem)
    stale: list[str] = []
    if existing is not None:
        stale = [path for path in found if _unchanged(root, path, existing)]
        found = [path for path in found if path not in stale]
    if not found:
        return Reading(None, (), _nothing_found(location, stale))
    reports = []
    total = 0
    for path in found:
        read = read_case_file(root, path, MAX_FILE_BYTES)
        if read.data is None:
            return Reading(None, tuple(found), f"report {cut(path)} {read.problem}")
        total += len(read.data)
        if total > MAX_TOTAL_BYTES:
            return Reading(None, tuple(found), f"the reports are over {MAX_TOTAL_BYTES} bytes")
        try:
            reports.append(parse_report(read.data, report_format))
        except ReportError as error:
            return Reading(None, tuple(found), f"report {cut(path)} {error}")
    return Reading(merge(reports), tuple(found))


def matching_files(root: Path, location: str | Glob) -> tuple[list[str], str | None]:
    """The paths a location names under root (a path names itself, present or not), or
    the fact that stops a glob's listing: an incomplete listing could hide a report."""
    if isinstance(location, str):
        return [location], None
    listing = list_case(root, location.base)
    if listing.problem is not None:
        return [], f"the files matching {location.pattern} cannot all be listed: {listing.problem}"
    found = [path for path in listing.files() if location.matches(path)]
    if len(found) > MAX_REPORTS:
        return [], f"{len(found)} files match {location.pattern}, over the {MAX_REPORTS} cap"
    return found, None


def file_identity(root: Path, relative: str) -> Identity | None:
    """(inode, size, mtime_ns) of the file a case path names, None when there is none."""
    path, _ = resolve_inside(root, relative)
    if path is None:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def _unchanged(root: Path, path: str, existing: Mapping[str, Identity]) -> bool:
    identity = file_identity(root, path)
    return identity is not None and identity == existing.get(path)


def _nothing_found(location: str | Glob, stale: Sequence[str]) -> str:
    if isinstance(location, str):  # a lone path that is found and unusable is stale
        return f"report {cut(location)} is stale: the command did not write it (it was there)"
    if stale:
        return (
            f"no file matching {location.pattern} was written by the command; "
            f"{len(stale)} stale: {listed(stale)}"
        )
    return f"no file matches {location.pattern}"


class FreshReports:
    """The sandbox's probe: before the command runs, the identity of each report already
    there; after it, the reports it wrote or rewrote, read in the dir where it ran."""

    def __init__(self, location: str | Glob, report_format: str | None) -> None:
        self.location = location
        self.report_format = report_format
        self.existing: dict[str, Identity] = {}

    def before(self, workdir: Path) -> None:
        found, _ = matching_files(workdir, self.location)
        self.existing = {
            path: identity
            for path in found
            if (identity := file_identity(workdir, path)) is not None
        }

    def after(self, workdir: Path) -> Reading:
        return read_reports(workdir, self.location, self.report_format, self.existing)
