"""Keeps API keys out of everything the verifier prints or writes.

Keys only ever travel in request headers, but error text can still carry them: a
proxy that echoes the request, a base URL with credentials in it, a model that
repeats what it was sent. Every string that leaves an LLM judge (its error, its
rationale, its details) passes through `redact` first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from verifier.judges.llm.providers import SECRET_ENV_VARS

REDACTED = "[redacted]"
_MIN_SECRET_CHARS = 8  # shorter values ("EMPTY", "none") are placeholders, not secrets
_PATTERNS = (
    # user:password@ in URLs
    (re.compile(r"(?<=://)([^/\s:@]+):[^@/\s]+@"), rf"\1:{REDACTED}@"),
    # bearer tokens and key headers echoed back
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\1{REDACTED}"),
    (re.compile(r"(?i)(x-api-key[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{8,}"), rf"\1{REDACTED}"),
    # the shapes of OpenAI and Anthropic keys, wherever they come from
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), REDACTED),
)


def known_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The API key values currently set, longest first (so no key is half-replaced)."""
    environ = os.environ if environ is None else environ
    values = {environ.get(name, "").strip() for name in SECRET_ENV_VARS}
    return tuple(sorted((v for v in values if len(v) >= _MIN_SECRET_CHARS), key=len, reverse=True))


def redact(text: str, secrets: tuple[str, ...] | None = None) -> str:
    """text with every known key, credential in a URL and key-shaped token replaced."""
    for secret in known_secrets() if secrets is None else secrets:
        text = text.replace(secret, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_tree(value: Any, secrets: tuple[str, ...] | None = None) -> Any:
    """redact applied to every string inside nested dicts, lists and tuples."""
    secrets = known_secrets() if secrets is None else secrets
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, Mapping):
        return {key: redact_tree(item, secrets) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(item, secrets) for item in value]
    return value
