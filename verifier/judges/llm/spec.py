"""An LLM judge entry's own keys, as read by verifier.judges.kinds.llm."""

from __future__ import annotations

from pathlib import PurePosixPath

from verifier.named import NamedTuple


class LLMSpec(NamedTuple):
    prompt_key: str  # which of PROMPT_KEYS the prompt came from
    prompt: str  # the template text (prompt_file: the file's text)
    model: str | None = None
    samples: int = 1
    context: tuple[PurePosixPath, ...] = ()
    provider: str | None = None
    builtin: str | None = (
        None  # an LLM builtin's name: its arguments are declared, its scale pass/fail
    )
    context_tokens: int | None = None  # what the model takes; None: from the model's name
