"""The LLM providers: one registry entry each, and their wire formats.

OpenAI-compatible covers the hosted API and what runs inside a cluster (vLLM,
LiteLLM, Ollama); Anthropic covers the hosted API and its proxies. A Provider
carries everything the rest of the package derives from it: its names, its
environment variables (base URL, API keys, which are also what redaction
removes), its default URL and its endpoint class, which turns a Prompt into a
request (structured output asked for as a forced tool call or a JSON schema)
and a response into a provider-neutral Reply. API keys are read from the
environment at request time, in the judge's process, and go into headers only.
Adding a provider is one endpoint class and one Provider in PROVIDERS.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import attrs

from verifier.judges.llm.answer_scale import TOOL_NAME, AnswerError, AnswerScale, OutputMode
from verifier.judges.llm.parse import Reply, excerpt

if TYPE_CHECKING:
    from verifier.judges.llm.prompt import Prompt

ANTHROPIC_VERSION = "2023-06-01"
USER_AGENT = "harbor-verifier"


# OpenAI's reasoning models reject `temperature` and `max_tokens` (o1, o3, o4-mini, gpt-5...).
_REASONING_MODEL = re.compile(r"(o[134]|gpt-5)([-._:@]|$)", re.IGNORECASE)
# Anthropic's thinking budget (tokens) per reasoning_effort, as LiteLLM maps the levels
# for the Messages API (its constants DEFAULT_REASONING_EFFORT_*_THINKING_BUDGET; minimal
# is raised to Anthropic's minimum budget, 1024).
THINKING_BUDGETS = {
    "minimal": 1024,
    "low": 1024,
    "medium": 2048,
    "high": 4096,
    "xhigh": 8192,
    "max": 16384,
}
# What a model can be found (by its 400) to reject, and what the request then does instead.
NO_TEMPERATURE = "no-temperature"
NO_SEED = "no-seed"
COMPLETION_TOKENS = "max-completion-tokens"
Quirks = frozenset[str]


@attrs.frozen
class Generation:
    """Request options that are the same for every request of a judge."""

    max_tokens: int = 1024
    temperature: float | None = 0.0  # None: leave it to the server
    output_mode: OutputMode = "tool"
    seed: int | None = None  # VERIFIER_LLM_SEED; OpenAI-compatible endpoints only
    reasoning_effort: str | None = None  # the judge's `reasoning_effort`; None: not sent

    def thinking_tokens(self) -> int:
        """Anthropic's thinking budget for reasoning_effort: LiteLLM's for the level (so a
        rewardkit judge asks as it did), 0 for none."""
        return THINKING_BUDGETS.get(self.reasoning_effort or "none", 0)


def is_reasoning_model(model: str) -> bool:
    """o1/o3/o4/gpt-5 families, by the last part of the name (`azure/o3-mini` too)."""
    return _REASONING_MODEL.match(model.rsplit("/", 1)[-1]) is not None


def learn_quirk(message: str, body: Mapping[str, Any]) -> str | None:
    """What a 400 says the model rejects, when the request sent it: then it is left out
    (or renamed) for this model from now on. None when the 400 is about something else."""
    text = message.lower()
    if "temperature" in body and "temperature" in text:
        return NO_TEMPERATURE
    if "max_tokens" in body and "max_completion_tokens" in text:
        return COMPLETION_TOKENS
    if "seed" in body and "seed" in text:
        return NO_SEED
    return None


class Endpoint(Protocol):
    """One wire format at one URL for one model (read-only: endpoints are records)."""

    @property
    def provider(self) -> Provider: ...

    @property
    def base_url(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def url(self) -> str: ...

    def request(
        self,
        prompt: Prompt,
        scale: AnswerScale,
        generation: Generation,
        quirks: Quirks = frozenset(),
    ) -> tuple[dict[str, str], dict[str, Any]]: ...

    def output_ceiling(self, generation: Generation) -> int:
        """The most output tokens a request may be billed for (what a budget reserves):
        the max_tokens its body carries."""
        ...

    def read(self, payload: Mapping[str, Any]) -> Reply: ...

    def hint(self, status: int | None) -> str: ...


class EndpointClass(Protocol):
    """What a provider makes its endpoints with (OpenAIChat, AnthropicMessages)."""

    def __call__(self, *, provider: Provider, base_url: str, model: str) -> Endpoint: ...


@attrs.frozen
class OpenAIChat:
    provider: Provider
    base_url: str
    model: str

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def output_ceiling(self, generation: Generation) -> int:
        """max_tokens, which caps a reasoning model's reasoning tokens too."""
        return generation.max_tokens

    def request(
        self,
        prompt: Prompt,
        scale: AnswerScale,
        generation: Generation,
        quirks: Quirks = frozenset(),
    ) -> tuple[dict[str, str], dict[str, Any]]:
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        _, key = self.provider.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        # The hosted API wants max_completion_tokens for its newer models, and reasoning
        # models everywhere; servers inside a cluster (vLLM, Ollama) all know max_tokens.
        reasoning = is_reasoning_model(self.model)
        hosted = urlsplit(self.base_url).hostname == "api.openai.com"
        completion_tokens = hosted or reasoning or COMPLETION_TOKENS in quirks
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
            "max_completion_tokens" if completion_tokens else "max_tokens": generation.max_tokens,
        }
        if generation.temperature is not None and not reasoning and NO_TEMPERATURE not in quirks:
            body["temperature"] = generation.temperature
        if generation.seed is not None and NO_SEED not in quirks:
            body["seed"] = generation.seed
        if generation.reasoning_effort is not None:
            body["reasoning_effort"] = generation.reasoning_effort
        if generation.output_mode == "tool":
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": TOOL_NAME,
                        "description": "Submit the grade for the material.",
                        "parameters": scale.schema(),
                    },
                }
            ]
            body["tool_choice"] = {"type": "function", "function": {"name": TOOL_NAME}}
        elif generation.output_mode == "json":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "grade", "schema": scale.schema()},
            }
        return headers, body

    def read(self, payload: Mapping[str, Any]) -> Reply:
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise AnswerError(f"the response has no choices: {_shown(payload)}")
        choice = choices[0]
        said = choice.get("message")
        message = said if isinstance(said, dict) else {}
        arguments = None
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                arguments = function.get("arguments")
                break
        text = _joined_text(message.get("content")) or message.get("refusal")
        counted = payload.get("usage")
        usage = counted if isinstance(counted, dict) else {}
        return Reply(
            text=text if isinstance(text, str) else None,
            arguments=arguments,
            stop_reason=choice.get("finish_reason"),
            usage=_usage(usage, "prompt_tokens", "completion_tokens"),
            model=payload.get("model") if isinstance(payload.get("model"), str) else None,
        )

    def hint(self, status: int | None) -> str:
        return _hint(status, self.provider, "does $OPENAI_BASE_URL end in /v1")


@attrs.frozen
class AnthropicMessages:
    provider: Provider
    base_url: str
    model: str

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        return base + ("/messages" if base.endswith("/v1") else "/v1/messages")

    def output_ceiling(self, generation: Generation) -> int:
        """max_tokens and the thinking budget on top of it, as the body carries them."""
        return generation.max_tokens + generation.thinking_tokens()

    def request(
        self,
        prompt: Prompt,
        scale: AnswerScale,
        generation: Generation,
        quirks: Quirks = frozenset(),
    ) -> tuple[dict[str, str], dict[str, Any]]:
        """The Messages API has no seed: VERIFIER_LLM_SEED is not sent here. A
        reasoning_effort is a thinking budget on top of max_tokens; Anthropic then takes
        no temperature and no forced tool call, so the tool is offered (`auto`) and an
        answer in text is read as in the other output modes."""
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "anthropic-version": ANTHROPIC_VERSION,
        }
        variable, key = self.provider.api_key()
        if variable == self.provider.key_env[0]:
            headers["x-api-key"] = key
        elif key:  # ANTHROPIC_AUTH_TOKEN, as a bearer token
            headers["Authorization"] = f"Bearer {key}"
        thinking = generation.thinking_tokens()
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": generation.max_tokens + thinking,
            "system": prompt.system,
            "messages": [{"role": "user", "content": prompt.user}],
        }
        if thinking:
            body["thinking"] = {"type": "enabled", "budget_tokens": thinking}
        elif generation.temperature is not None and NO_TEMPERATURE not in quirks:
            body["temperature"] = generation.temperature
        if generation.output_mode == "tool":
            body["tools"] = [
                {
                    "name": TOOL_NAME,
                    "description": "Submit the grade for the material.",
                    "input_schema": scale.schema(),
                }
            ]
            forced = {"type": "tool", "name": TOOL_NAME}
            body["tool_choice"] = {"type": "auto"} if thinking else forced
        return headers, body

    def read(self, payload: Mapping[str, Any]) -> Reply:
        content = payload.get("content")
        if not isinstance(content, list):
            raise AnswerError(f"the response has no content: {_shown(payload)}")
        arguments = None
        texts = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and arguments is None:
                arguments = block.get("input")
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
        counted = payload.get("usage")
        usage = counted if isinstance(counted, dict) else {}
        return Reply(
            text="\n".join(texts) or None,
            arguments=arguments,
            stop_reason=payload.get("stop_reason"),
            usage=_usage(usage, "input_tokens", "output_tokens"),
            model=payload.get("model") if isinstance(payload.get("model"), str) else None,
        )

    def hint(self, status: int | None) -> str:
        return _hint(status, self.provider, "is $ANTHROPIC_BASE_URL the API root (no /v1/messages)")


def _hint(status: int | None, provider: Provider, url_question: str) -> str:
    if status in (401, 403):
        key_var = provider.key_env[0]
        state = "set but refused" if os.environ.get(key_var, "").strip() else "not set"
        return f" (${key_var} is {state})"
    if status == 404:
        return f" (is the model name right, and {url_question}?)"
    return ""


def _joined_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        return "\n".join(t for t in texts if isinstance(t, str)) or None
    return None


def _usage(usage: Mapping[str, Any], input_key: str, output_key: str) -> dict[str, int]:
    found = {}
    for name, key in (("input_tokens", input_key), ("output_tokens", output_key)):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            found[name] = value
    return found


def _shown(payload: Mapping[str, Any]) -> str:
    return excerpt(json.dumps(payload, default=str))


@attrs.frozen
class Provider:
    name: str  # as judges.json records it
    label: str  # as error messages name it
    aliases: tuple[str, ...]  # what a judge's `provider:` key may say
    base_url_env: str
    default_base_url: str
    key_env: tuple[str, ...]  # API key variables, in the order they are tried (all redacted)
    model_prefixes: tuple[str, ...]  # an unprefixed model name starting so means this provider
    endpoint: EndpointClass

    def make_endpoint(self, base_url: str, model: str) -> Endpoint:
        return self.endpoint(provider=self, base_url=base_url, model=model)

    def api_key(self) -> tuple[str | None, str]:
        """(variable, value) of the first key variable set, read now; (None, "") if none is."""
        for variable in self.key_env:
            value = os.environ.get(variable, "").strip()
            if value:
                return variable, value
        return None, ""


OPENAI = Provider(
    name="openai",
    label="OpenAI-compatible",
    aliases=("openai-compatible", "vllm", "litellm", "ollama"),
    base_url_env="OPENAI_BASE_URL",
    default_base_url="https://api.openai.com/v1",
    key_env=("OPENAI_API_KEY",),
    model_prefixes=(),
    endpoint=OpenAIChat,
)
ANTHROPIC = Provider(
    name="anthropic",
    label="Anthropic",
    aliases=(),
    base_url_env="ANTHROPIC_BASE_URL",
    default_base_url="https://api.anthropic.com",
    key_env=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
    model_prefixes=("claude",),
    endpoint=AnthropicMessages,
)
# The first provider is the default for a model name no prefix and no provider names.
PROVIDERS: tuple[Provider, ...] = (OPENAI, ANTHROPIC)
PROVIDERS_BY_ALIAS = {
    alias: provider for provider in PROVIDERS for alias in (provider.name, *provider.aliases)
}
