"""Keeps API keys out of everything an LLM judge reports: verifier.redact, with the key
variables of every registered provider (verifier.judges.llm.providers) counted as
secrets whatever their names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verifier import redact as _core
from verifier.judges.llm.providers import SECRET_ENV_VARS

REDACTED = _core.REDACTED


def known_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    return _core.known_secrets(environ, SECRET_ENV_VARS)


def redact(text: str, secrets: tuple[str, ...] | None = None) -> str:
    return _core.redact(text, known_secrets() if secrets is None else secrets)


def redact_tree(value: Any, secrets: tuple[str, ...] | None = None) -> Any:
    return _core.redact_tree(value, known_secrets() if secrets is None else secrets)
