"""How many tokens a prompt costs, how many the model takes, and an overflow when it says so.

The case material is budgeted in characters (VERIFIER_LLM_MAX_CASE_CHARS) and in
tokens: a character budget alone lets 80,000 CJK characters, under it, overflow a
32k-token context, and the endpoint's 400 then made a pass/fail gate an error. No
tokenizer ships in the image, so the count is an estimate, conservative on purpose:
three ASCII characters a token (English runs nearer four, code nearer three), one and
a half tokens for any other character of the Basic Multilingual Plane (CJK, accents,
combining marks), three for one beyond it (emoji). The context a model takes comes
from the judge's `context_tokens`, else $VERIFIER_LLM_CONTEXT_TOKENS, else a table of
model families, else 32,768; a server that runs a model with less (vLLM's
--max-model-len) needs one of the first two.

A request the endpoint still refuses for its length is a fact about the case's
material (it chose what it left), never an error: the judge scores its lowest value.

A budget (`verifier batch --max-cost-usd`) needs the opposite: a count never under the
real one, whatever the tokenizer. That is the text's UTF-8 bytes (a byte-level BPE
token, as OpenAI's and Anthropic's are, covers at least one byte; a SentencePiece
token at least one character) plus REQUEST_OVERHEAD_TOKENS: about three to four times
the real count for English, never less.
"""

from __future__ import annotations

import re

DEFAULT_CONTEXT_TOKENS = 32_768
# What a request costs besides its messages and the answer's schema (counted by the
# prompt): roles, the tool's name and wrapping.
REQUEST_OVERHEAD_TOKENS = 400
# Model families and the context they take, first match wins (the name lower-cased;
# a prefix such as `openai/` or an org such as `meta-llama/` does not matter).
CONTEXT_TOKENS_BY_MODEL = (
    (r"gpt-4\.1", 1_047_576),
    (r"gpt-5", 400_000),
    (r"gpt-4o|gpt-4-turbo|chatgpt-4o", 128_000),
    (r"gpt-4-32k", 32_768),
    (r"gpt-4", 8_192),
    (r"gpt-3\.5-turbo", 16_385),
    (r"(^|[/:])o[134](-|$)", 200_000),
    (r"gpt-oss", 131_072),
    (r"claude", 200_000),
    (r"gemini", 1_048_576),
    (r"llama-?3\.[123]|llama-?4", 131_072),
    (r"llama", 8_192),
    (r"mistral-large|mistral-medium|mistral-nemo|codestral", 131_072),
    (r"mistral|mixtral", 32_768),
    (r"qwen", 32_768),
    (r"deepseek", 65_536),
    (r"gemma-?3", 131_072),
    (r"gemma", 8_192),
    (r"granite-?3|granite-?4", 131_072),
    (r"phi-?4", 16_384),
)
_FAMILIES = tuple((re.compile(pattern), tokens) for pattern, tokens in CONTEXT_TOKENS_BY_MODEL)
# What endpoints say when a request is longer than the model takes (OpenAI, Azure,
# vLLM, TGI, llama.cpp, Anthropic, Gemini, LiteLLM).
_OVERFLOW = re.compile(
    r"context[_ ]length|context (?:window|size)|maximum (?:model |context |input )?length|"
    r"too many (?:input )?tokens|prompt is too long|(?:input|prompt)[^.]{0,40}is too long|"
    r"max_new_tokens` must be|exceeds? (?:the )?(?:available |maximum |model(?:'s)? )?"
    r"context|longer than the maximum|input token count",
    re.IGNORECASE,
)


def estimate_tokens(text: str) -> int:
    """A conservative count of the tokens text costs (see the module's docstring)."""
    if text.isascii():
        return -(-len(text) // 3)
    ascii_count = len(text.encode("ascii", "ignore"))
    astral = len(text.encode("utf-16-le", "surrogatepass")) // 2 - len(text)
    other = len(text) - ascii_count - astral
    return -(-ascii_count // 3) + (3 * other + 1) // 2 + 3 * astral


def token_ceiling(*texts: str) -> int:
    """The most tokens a request carrying texts can cost (see the module's docstring)."""
    counted = sum(len(text.encode("utf-8", "surrogatepass")) for text in texts)
    return counted + REQUEST_OVERHEAD_TOKENS


def context_tokens(model: str, override: int | None = None) -> int:
    """The tokens the model takes: the override, else its family's, else the default."""
    if override is not None:
        return override
    name = model.lower()
    return next(
        (tokens for pattern, tokens in _FAMILIES if pattern.search(name)), DEFAULT_CONTEXT_TOKENS
    )


def is_context_overflow(status: int | None, message: str) -> bool:
    """Whether an endpoint refused a request for its length (400 saying so, or 413)."""
    return status == 413 or (status == 400 and _OVERFLOW.search(message) is not None)
