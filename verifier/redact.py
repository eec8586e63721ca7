"""Keeps secrets out of everything the verifier prints or writes.

The grader's secrets are the values of its key, token, secret, password and
credential variables (OPENAI_API_KEY, ANTHROPIC_AUTH_TOKEN, HF_TOKEN, ...). Code
can still leak them: a judge that prints its environment, a command from the case
that read /proc, a proxy that echoes a request. Every judge's rationale, error and
details, and everything judges print, pass through `redact` before they leave
the grader, whatever the judge's kind.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[redacted]"
SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|AUTH)(?:_|$)",
    re.IGNORECASE,
)
_MIN_SECRET_CHARS = 4
# Values that stand in for "no key" (vLLM's "EMPTY") are not secrets.
_PLACEHOLDERS = frozenset({"empty", "none", "null", "dummy", "true", "false", "unset"})


@functools.cache
def _patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
    """Credential shapes, compiled when there is first text to redact (most grades of
    judges that return bare values have none)."""
    return (
        # user:password@ in URLs
        (re.compile(r"(?<=://)([^/\s:@]+):[^@/\s]+@"), rf"\1:{REDACTED}@"),
        # bearer tokens and key headers echoed back
        (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\1{REDACTED}"),
        (re.compile(r"(?i)(x-api-key[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{8,}"), rf"\1{REDACTED}"),
        # the shapes of OpenAI and Anthropic keys, wherever they come from
        (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), REDACTED),
    )


def known_secrets(
    environ: Mapping[str, str] | None = None, names: Iterable[str] = ()
) -> tuple[str, ...]:
    """The secret values set in environ (variables named like secrets, and `names`),
    longest first so that no secret is half-replaced."""
    environ = os.environ if environ is None else environ
    wanted = set(names)
    values = {
        value.strip()
        for name, value in environ.items()
        if name in wanted or SECRET_NAME.search(name)
    }
    kept = (v for v in values if len(v) >= _MIN_SECRET_CHARS and v.lower() not in _PLACEHOLDERS)
    return tuple(sorted(kept, key=len, reverse=True))


def redact(text: str, secrets: tuple[str, ...] | None = None) -> str:
    """text with every known secret, credential in a URL and key-shaped token replaced."""
    for secret in known_secrets() if secrets is None else secrets:
        text = text.replace(secret, REDACTED)
    for pattern, replacement in _patterns():
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
