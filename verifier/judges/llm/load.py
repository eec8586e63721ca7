"""A judge entry's LLM keys -> a ready LLMJudge, or a ConfigError naming the key.

Everything checkable without a case is checked here, once, at load: exactly one
prompt source, the template compiles and names only known variables, the prompt
and context files exist, a model resolves to a provider with a usable base URL,
and the VERIFIER_LLM_* tuning variables parse. A config that passes cannot fail
later for any of these reasons.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args
from urllib.parse import urlsplit

import attrs

from verifier.config import EvalConfig, JudgeConfig
from verifier.errors import ConfigError
from verifier.judges.llm.judge import LLMJudge
from verifier.judges.llm.prompt import OutputMode, PromptPlan, Reference
from verifier.judges.llm.providers import (
    BASE_URL_ENV,
    DEFAULT_BASE_URLS,
    PROVIDER_ALIASES,
    Generation,
    ProviderName,
    make_endpoint,
)
from verifier.judges.llm.redact import redact
from verifier.judges.llm.scale import Scale
from verifier.judges.llm.template import TemplateProblem, compile_template
from verifier.judges.llm.transport import RetryPolicy

PROMPT_KEYS = ("llm_rubric", "prompt", "prompt_file")
MAX_SAMPLES = 25
MAX_CONTEXT_BYTES = 1024 * 1024
DEFAULT_MAX_CASE_CHARS = 100_000
MODEL_ENV = "EVAL_JUDGE_MODEL"


@attrs.frozen(slots=True)
class Tuning:
    """The VERIFIER_LLM_* environment variables (one value for every LLM judge of a run)."""

    policy: RetryPolicy
    max_tokens: int
    temperature: float | None  # None: not sent
    output_mode: OutputMode
    max_case_chars: int


def build_judge(judge: JudgeConfig, config: EvalConfig, environ: Mapping[str, str]) -> LLMJudge:
    at = _Locator(str(config.path), judge.key)
    llm = judge.llm
    for key in llm:
        if key != "provider" and key not in ("model", "samples", "context", *PROMPT_KEYS):
            raise at.error(key, "is not an LLM judge key")
    prompt_key, source = _prompt_source(llm, config.base_dir, at)
    try:
        template = compile_template(source)
    except TemplateProblem as error:
        raise at.error(prompt_key, str(error)) from None
    provider, model = resolve_model(judge, config, environ, at)
    base_url = _base_url(provider, environ, at)
    samples = _samples(llm.get("samples", 1), at)
    tuning = read_tuning(environ, samples)
    scale = Scale.of(judge, config)
    plan = PromptPlan(
        template=template,
        append_material=not template.places_case,
        references=_references(llm.get("context"), config.base_dir, at),
        scale=scale,
        output_mode=tuning.output_mode,
        max_case_chars=tuning.max_case_chars,
    )
    return LLMJudge(
        endpoint=make_endpoint(provider, base_url, model),
        plan=plan,
        generation=Generation(
            max_tokens=tuning.max_tokens,
            temperature=tuning.temperature,
            output_mode=tuning.output_mode,
        ),
        policy=tuning.policy,
        samples=samples,
        timeout_s=judge.timeout_s,
        arguments=dict(judge.arguments),
    )


@attrs.frozen(slots=True)
class _Locator:
    source: str
    judge_key: str

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(self.source, f"{self.judge_key}.{key}", problem)


def resolve_model(
    judge: JudgeConfig, config: EvalConfig, environ: Mapping[str, str], at: _Locator
) -> tuple[ProviderName, str]:
    """(provider, model name as sent): the judge's model, else models.judge, else the env.

    A `provider:` key wins and the model is then sent verbatim (a vLLM model may
    well be called `openai/gpt-oss-20b`); otherwise an `openai/` or `anthropic/`
    prefix picks the provider and is dropped, and an unprefixed name is Anthropic
    when it starts with `claude`, OpenAI-compatible otherwise.
    """
    raw = judge.llm.get("model")
    if raw is not None and (not isinstance(raw, str) or not raw.strip()):
        raise at.error("model", f"{raw!r} must be a model name like 'anthropic/claude-sonnet-4-5'")
    name = raw or config.default_model or environ.get(MODEL_ENV, "").strip()
    if not name:
        raise at.error(
            "model",
            f"no model for this LLM judge: set model on the judge, models.judge in eval.yaml, "
            f"or ${MODEL_ENV}",
        )
    name = name.strip()
    explicit = judge.llm.get("provider")
    if explicit is not None:
        if explicit not in PROVIDER_ALIASES:
            raise at.error(
                "provider", f"{explicit!r} must be one of {', '.join(sorted(PROVIDER_ALIASES))}"
            )
        return PROVIDER_ALIASES[explicit], name
    prefix, _, rest = name.partition("/")
    if prefix in ("openai", "anthropic") and rest:
        return prefix, rest  # type: ignore[return-value]
    return ("anthropic" if name.lower().startswith("claude") else "openai"), name


def _prompt_source(llm: Mapping[str, Any], base_dir: Path, at: _Locator) -> tuple[str, str]:
    present = [key for key in PROMPT_KEYS if key in llm]
    if len(present) > 1:
        raise at.error(present[1], f"set only one of {', '.join(present)}")
    key = present[0]
    value = llm[key]
    if not isinstance(value, str) or not value.strip():
        raise at.error(key, "must be a non-empty string")
    if key != "prompt_file":
        return key, value
    path = base_dir / value
    try:
        return key, path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise at.error(key, f"{path} not found (paths are relative to eval.yaml)") from None
    except (OSError, UnicodeDecodeError) as error:
        raise at.error(key, f"{path} cannot be read: {error}") from None


def _references(value: Any, base_dir: Path, at: _Locator) -> tuple[Reference, ...]:
    if value is None:
        return ()
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        raise at.error("context", "must be a file path or a list of file paths")
    references = []
    for name in names:
        path = base_dir / name
        try:
            size = path.stat().st_size
            if size > MAX_CONTEXT_BYTES:
                raise at.error(
                    "context", f"{path} is {size} bytes; the limit is {MAX_CONTEXT_BYTES}"
                )
            references.append(Reference(name=name, text=path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise at.error(
                "context", f"{path} not found (paths are relative to eval.yaml)"
            ) from None
        except (OSError, UnicodeDecodeError) as error:
            raise at.error("context", f"{path} cannot be read: {error}") from None
    return tuple(references)


def _samples(value: Any, at: _Locator) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SAMPLES:
        raise at.error("samples", f"{value!r} must be a whole number from 1 to {MAX_SAMPLES}")
    return value


def _base_url(provider: ProviderName, environ: Mapping[str, str], at: _Locator) -> str:
    variable = BASE_URL_ENV[provider]
    url = environ.get(variable, "").strip() or DEFAULT_BASE_URLS[provider]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise at.error("model", f"${variable} {redact(url)!r} is not an http(s) URL")
    return url


def read_tuning(environ: Mapping[str, str], samples: int = 1) -> Tuning:
    """The VERIFIER_LLM_* variables; a bad value is a ConfigError naming the variable."""
    temperature_text = environ.get("VERIFIER_LLM_TEMPERATURE", "").strip().lower()
    if temperature_text in ("none", "omit", "default"):
        temperature = None
    elif temperature_text:
        temperature = _number(environ, "VERIFIER_LLM_TEMPERATURE", 0.0, minimum=0.0)
    else:  # one sample: as deterministic as the server allows; several: let them differ
        temperature = 0.0 if samples == 1 else None
    output_mode = environ.get("VERIFIER_LLM_OUTPUT", "tool").strip() or "tool"
    if output_mode not in get_args(OutputMode):
        raise ConfigError(
            "environment", "VERIFIER_LLM_OUTPUT", f"{output_mode!r} must be tool, json or text"
        )
    return Tuning(
        policy=RetryPolicy(
            request_timeout_s=_number(environ, "VERIFIER_LLM_REQUEST_TIMEOUT", 120.0, minimum=0.01),
            retries=int(_number(environ, "VERIFIER_LLM_RETRIES", 3, minimum=0, whole=True)),
            backoff_s=_number(environ, "VERIFIER_LLM_BACKOFF", 1.0, minimum=0.0),
            max_wait_s=_number(environ, "VERIFIER_LLM_MAX_WAIT", 30.0, minimum=0.0),
        ),
        max_tokens=int(_number(environ, "VERIFIER_LLM_MAX_TOKENS", 1024, minimum=1, whole=True)),
        temperature=temperature,
        output_mode=output_mode,  # type: ignore[arg-type]
        max_case_chars=int(
            _number(
                environ,
                "VERIFIER_LLM_MAX_CASE_CHARS",
                DEFAULT_MAX_CASE_CHARS,
                minimum=1,
                whole=True,
            )
        ),
    )


def _number(
    environ: Mapping[str, str], name: str, default: float, *, minimum: float, whole: bool = False
) -> float:
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= minimum or value == float("inf") or (whole and not value.is_integer()):
        kind = "a whole number" if whole else "a number"
        raise ConfigError("environment", name, f"{text!r} must be {kind} >= {minimum:g}")
    return value
