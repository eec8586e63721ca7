"""The grader's store of trusted byte code for `runner: pytest` (the launcher's
TrustedCode): compiled modules, each named by the SHA-256 of the source it was compiled
from and its variant, so that a run compiles (and pytest rewrites) only what no earlier
run of the same tests compiled.

Where it is: `pyc/` in the dir of this UID's scratch dirs (`verifier-sandbox-<uid>` in
the temp dir), or the absolute dir `VERIFIER_PYC_STORE` names (a persistent disk, an
image's); every grade hides it from its commands (Landlock, or as root a dir only root
may enter: it is made 0700): no command can read, list or write it. It is not used
when the sandbox is weak, nor with `VERIFIER_PYC_STORE=off`.

A run is handed, as read-only provided files (`pyc/<sha256>/<variant>`), the entries of
the sources the last run of the same tests (same eval.yaml dir, same command) looked up,
each hashed as the case holds it now; the launcher looks each module up by the hash of
the very source it imports, so an entry is that source's compile or nothing. What the
store lacks, and the last run found the same (what recurs: the task's tests, the files
the agent left as they were; not each case's changes), is named in `pyc-fill.txt`: the
launcher compiles it before any code of the case runs and hands the entries back signed
with the run's key; only entries whose signature verifies are kept. What the run looked
up (and each source's hash) comes back unsigned, as the next run's hint: forged, it can
only cost time (a file hashed, compiled once).

Never a verdict: anything that fails here (a full disk, a store another grader of this
UID removed) leaves the run to compile as it would without a store.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from types import MappingProxyType

import attrs

from verifier.casefiles import CaseFile, read_case_file
from verifier.judges.builtins.runner_reports import SIGNATURE_SUFFIX, signed
from verifier.sandbox import SandboxPolicy
from verifier.sandbox.plan import beneath

STORE_ENV = "VERIFIER_PYC_STORE"  # "off": no store
# The launcher's names (pytest_launcher.py, a script the grader does not import).
PYC_DIR = "pyc"
PYC_FILL = "pyc-fill.txt"
PYC_ENTRIES = "pyc-entries.json"
PYC_SEEN = "pyc-seen.json"
RETURNED = (PYC_SEEN, PYC_ENTRIES, f"{PYC_ENTRIES}{SIGNATURE_SUFFIX}")
KINDS = ("plain", "test")
MAX_FILES = 2000  # of a hint (the launcher's cap too)
MAX_SOURCE_BYTES = 16 * 1024 * 1024  # of one source hashed (the launcher's cap too)
MAX_HASHED_BYTES = 64 * 1024 * 1024  # of all sources hashed for one run
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_VARIANT = re.compile(r"[A-Za-z0-9._-]{1,200}\Z")


@attrs.frozen
class Handing:
    """What one run is handed: the store's entries and the fill list (provided name ->
    file), and the hint's key."""

    provided: Mapping[str, Path] = MappingProxyType({})
    key: str = ""
    fill: Path | None = None  # the fill list's file, removed once the run ended


def configured_store() -> Path | None:
    """The store's dir as `VERIFIER_PYC_STORE` names it (an absolute path; made when
    missing, so that the sandbox's plan finds it to hide), else None."""
    value = os.environ.get(STORE_ENV, "").strip()
    if not value.startswith("/") or os.path.realpath(value) == "/":  # / would hide all
        return None
    with contextlib.suppress(OSError):
        Path(value).mkdir(mode=0o700, parents=True, exist_ok=True)
    return Path(value)


def open_store(policy: SandboxPolicy) -> Path | None:
    """The store's dir (made when missing, this UID's alone), or None: off, the sandbox
    weak, or no dir can be made. The grade planned `policy` with it hidden (grading.py)."""
    value = os.environ.get(STORE_ENV, "").strip()
    if value.lower() in ("off", "0", "no", "false") or (value and not value.startswith("/")):
        return None
    if policy.hidden_by is None:  # a command could reach it
        return None
    store = configured_store() or Path(policy.scratch).parent / "pyc"
    if not any(beneath(str(store), hidden) for hidden in policy.hidden):
        return None  # planned before it was named: a command might reach it
    try:
        store.mkdir(mode=0o700, parents=True, exist_ok=True)
        (store / "hints").mkdir(mode=0o700, exist_ok=True)
        (store / "tmp").mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return store


def hint_key(config_dir: Path, command: Sequence[str]) -> str:
    """Which runs share a hint: those of the same eval.yaml dir and command."""
    text = json.dumps([str(config_dir.resolve()), list(command)])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def hand(store: Path, case_dir: Path, key: str) -> Handing:
    """The entries of the files the hint names (hashed as the case holds them), and the
    fill list of those the store lacks."""
    provided: dict[str, Path] = {}
    fill: list[str] = []
    hashed = 0
    for kind, relative, variant, last in read_hint(store / "hints" / f"{key}.json"):
        found = read_case_file(case_dir, relative, MAX_SOURCE_BYTES)
        if found.data is None or hashed + len(found.data) > MAX_HASHED_BYTES:
            continue
        hashed += len(found.data)
        digest = hashlib.sha256(found.data).hexdigest()
        entry = store / digest[:2] / digest / variant
        if entry.is_file():
            provided[f"{PYC_DIR}/{digest}/{variant}"] = entry
        elif digest == last:  # as the last run found it: what recurs is kept, not each change
            fill.append(f"{kind}\t{relative}\n")
    if not fill:
        return Handing(provided, key)
    try:
        handle, name = tempfile.mkstemp(dir=store / "tmp", suffix=".txt")
        with os.fdopen(handle, "w", encoding="utf-8") as written:
            written.writelines(fill)
    except OSError:
        return Handing(provided, key)
    return Handing({**provided, PYC_FILL: Path(name)}, key, Path(name))


def read_hint(path: Path) -> list[tuple[str, str, str, str]]:
    """(kind, relative path, variant, sha256) of each file a run looked up, as it handed
    them back (the case could forge them): those that name a kind, a .py file inside the
    case, a variant and a hash, at most MAX_FILES."""
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return []
    seen = document.get("seen") if isinstance(document, dict) else None
    found = []
    for item in seen if isinstance(seen, list) else ():
        if not (
            isinstance(item, list) and len(item) == 4 and all(isinstance(i, str) for i in item)
        ):
            continue
        kind, relative, variant, digest = item
        if (
            kind in KINDS
            and _source_path(relative)
            and _VARIANT.match(variant)
            and _SHA256.match(digest)
        ):
            found.append((kind, relative, variant, digest))
        if len(found) >= MAX_FILES:
            break
    return found


def keep(store: Path, handing: Handing, returned: Mapping[str, CaseFile], key: bytes) -> None:
    """After the run: the entries it compiled (their signature verified) into the store,
    and what it looked up as the next run's hint."""
    if handing.fill is not None:
        with contextlib.suppress(OSError):
            handing.fill.unlink()
    entries, signature = returned.get(PYC_ENTRIES), returned.get(f"{PYC_ENTRIES}{SIGNATURE_SUFFIX}")
    if entries is not None and entries.data is not None and signed(key, entries.data, signature):
        for digest, variant, data in trusted_entries(entries.data):
            _write(store / digest[:2] / digest / variant, data, store)
    seen = returned.get(PYC_SEEN)
    if seen is not None and seen.data is not None and len(seen.data) <= 4 * 1024 * 1024:
        hint = store / "hints" / f"{handing.key}.json"
        with contextlib.suppress(OSError):
            if not hint.is_file() or hint.read_bytes() != seen.data:
                _write(hint, seen.data, store)


def trusted_entries(document: bytes) -> list[tuple[str, str, bytes]]:
    """(sha256, variant, data) of each entry of the launcher's signed document."""
    try:
        entries = json.loads(document).get("entries")
    except (ValueError, AttributeError):
        return []
    found = []
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            continue
        digest, variant, data = entry.get("sha256"), entry.get("variant"), entry.get("data")
        if not (isinstance(digest, str) and _SHA256.match(digest)):
            continue
        if not (isinstance(variant, str) and _VARIANT.match(variant)) or not isinstance(data, str):
            continue
        try:
            found.append((digest, variant, base64.b64decode(data, validate=True)))
        except (binascii.Error, ValueError):
            continue
    return found


def _source_path(relative: str) -> bool:
    path = PurePosixPath(relative)
    return (
        relative.endswith(".py")
        and not path.is_absolute()
        and ".." not in path.parts
        and "\0" not in relative
        and len(relative) < 4096
    )


def _write(path: Path, data: bytes, store: Path) -> None:
    """data at path, whole or not at all (graders of this UID may write it side by side)."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=store / "tmp")
    except OSError:
        return
    try:
        with os.fdopen(handle, "wb") as written:
            written.write(data)
        os.replace(name, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(name)
