"""The response cache: a model's answer, kept under a hash of everything that determined it.

The key is the sha256 of the provider, the endpoint URL, the model, the output mode,
the sample's index and the full request body (its fences' random nonce replaced by a
fixed placeholder, so that the same case and config ask the same question). API keys
travel in headers, which are not part of the key, and the stored response is passed
through redaction first: no key reaches a cache file. Only answers that gave a usable
grade are kept, so a rerun asks again where the model's answer could not be read.

Entries are `DIR/<2 hex>/<64 hex>.json`, written to a temporary file and renamed. The
size is bounded per bucket: each of the 256 buckets may hold max_bytes / 256, and a
write that takes its bucket over that share removes the bucket's least recently used
entries (oldest modification time; a hit refreshes it) until it fits again. A cache
that cannot be read or written is a miss, never an error: it changes no grade.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from verifier.errors import OutputError
from verifier.redact import redact_tree

BUCKETS = 256
NONCE_PLACEHOLDER = "<nonce>"
_SUFFIX = ".json"


@attrs.frozen
class ResponseCache:
    directory: Path
    max_bytes: int

    @classmethod
    def create(cls, directory: Path, max_mb: int) -> ResponseCache:
        """The cache in directory, made if missing (OutputError, exit 4, if it cannot be)."""
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise OutputError(
                f"{directory}: the LLM answer cache cannot be created ({error.strerror}); "
                "pass another --llm-cache DIR, or --no-llm-cache"
            ) from None
        return cls(directory, max_mb * 1024 * 1024)

    @staticmethod
    def key(fields: Mapping[str, Any], body: Mapping[str, Any], nonce: str) -> str:
        """The entry's name: fields (provider, url, model, output mode, sample) and body."""
        text = json.dumps({**fields, "body": body}, sort_keys=True, default=str)
        return hashlib.sha256(text.replace(nonce, NONCE_PLACEHOLDER).encode()).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored response, or None (missing, unreadable, torn)."""
        path = self._path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            payload = entry["payload"]
        except (OSError, ValueError, TypeError, KeyError):
            return None
        if not isinstance(payload, dict):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: the last to be evicted
        return payload

    def put(self, key: str, payload: Mapping[str, Any], model: str) -> None:
        """Store a response (best effort), then keep its bucket within its share."""
        path = self._path(key)
        entry = {"model": model, "payload": redact_tree(payload)}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
            try:
                with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                    json.dump(entry, handle)
                os.replace(temporary, path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError:
            return
        self._evict(path.parent)

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}{_SUFFIX}"

    def _evict(self, bucket: Path) -> None:
        share = self.max_bytes // BUCKETS
        entries = []
        with contextlib.suppress(OSError), os.scandir(bucket) as listing:
            for entry in listing:
                if entry.name.endswith(_SUFFIX):
                    with contextlib.suppress(OSError):
                        status = entry.stat()
                        entries.append((status.st_mtime_ns, status.st_size, entry.path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= share:
                break
            with contextlib.suppress(OSError):
                os.unlink(path)
                total -= size
