"""An LLM judge's spec -> a ready LLMJudge, or a ConfigError naming the key.

Everything checkable without a case is checked here, once, at load (the keys
themselves were checked by verifier.judges.kinds.llm): the template compiles and
names only known variables, the context files can be read, a model (each panel
member's) resolves to a provider with a usable base URL, the criteria's rule suits
the judge's scale, and the VERIFIER_LLM_* tuning variables (the prices file among
them) parse. A config that passes cannot fail later for any of these reasons.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any, get_args
from urllib.parse import urlsplit

import attrs

from verifier.config import EvalConfig, JudgeConfig, Locator
from verifier.errors import ConfigError, MissingModelError
from verifier.judges.llm import panel
from verifier.judges.llm.answer_scale import AnswerScale, OutputMode
from verifier.judges.llm.criteria import CriteriaForm
from verifier.judges.llm.guard import Guard, GuardedForm
from verifier.judges.llm.judge import LLMJudge
from verifier.judges.llm.pricing import DEFAULT_PRICES, find_price
from verifier.judges.llm.prompt import PromptPlan, Reference
from verifier.judges.llm.providers import PROVIDERS, PROVIDERS_BY_ALIAS, Generation, Provider
from verifier.judges.llm.spec import PASS_RULES, LLMSpec, MemberSpec, PriceSpec
from verifier.judges.llm.template import TemplateProblem, compile_template
from verifier.judges.llm.tokens import context_tokens
from verifier.judges.llm.transport import RetryPolicy
from verifier.redact import redact

MAX_CONTEXT_BYTES = 1024 * 1024
DEFAULT_MAX_CASE_CHARS = 100_000
MODEL_ENV = "EVAL_JUDGE_MODEL"
PRICES_ENV = "VERIFIER_LLM_PRICES"


@attrs.frozen
class Tuning:
    """The VERIFIER_LLM_* environment variables (one value for every LLM judge of a run)."""

    policy: RetryPolicy
    max_tokens: int
    temperature: float | None  # None: not sent
    output_mode: OutputMode
    max_case_chars: int
    seed: int | None  # VERIFIER_LLM_SEED; None: not sent
    context_tokens: int | None = None  # VERIFIER_LLM_CONTEXT_TOKENS; None: by the model's name
    prices: Mapping[str, PriceSpec] = MappingProxyType({})  # $VERIFIER_LLM_PRICES's
    prices_file: str | None = None


def build_judge(judge: JudgeConfig, config: EvalConfig, environ: Mapping[str, str]) -> LLMJudge:
    spec: LLMSpec = judge.spec
    at = config.locator(judge.key)
    try:
        template = compile_template(spec.prompt)
    except TemplateProblem as error:
        raise at.child(spec.prompt_key).error(str(error)) from None
    tuning = read_tuning(environ, spec.samples)
    arguments, scale = dict(judge.arguments), AnswerScale.of(judge, config)
    if spec.builtin is not None:
        arguments, scale = _builtin_arguments(judge, spec.builtin, at), AnswerScale("pass_fail")
    criteria = _criteria_form(judge, spec, scale, at) if spec.criteria else None
    form: Any = criteria or scale
    guard = Guard(spec.guard.on_detect, spec.guard.ask_model) if spec.guard else None
    if guard is not None and guard.ask_model:
        form = GuardedForm(form)
    plan = PromptPlan(
        template=template,
        append_material=not template.places_case,
        references=_references(spec.context, config, at.child("context")),
        scale=form,
        output_mode=tuning.output_mode,
        max_case_chars=tuning.max_case_chars,
        files=_case_files(spec, config, template.places_case, at.child("files")),
        solution=_solution(spec.reference, config, at.child("reference")),
    )
    panel_rule = _panel_rule(judge, spec, scale, at) if spec.panel else "median"
    # The model last: `verifier check` reports a missing one as a warning, once every
    # other check of the judge has run.
    members: list[tuple[str | None, str | None, Locator]] = [
        (member.model, member.provider or spec.provider, at.child("panel").item(index))
        for index, member in enumerate(spec.panel)
    ] or [(spec.model, spec.provider, at)]
    endpoints = []
    for model_name, provider_name, where in members:
        provider, model = resolve_model(
            attrs.evolve(spec, model=model_name, provider=provider_name), config, environ, where
        )
        endpoints.append(provider.make_endpoint(_base_url(provider, environ, at), model))
    tables = [
        (spec.prices_source or "eval.yaml", spec.prices),
        (tuning.prices_file or PRICES_ENV, tuning.prices),
        ("default", DEFAULT_PRICES),
    ]
    # One prompt goes to every member: it must fit the smallest window among them.
    override = spec.context_tokens or tuning.context_tokens
    window = min(context_tokens(endpoint.model, override) for endpoint in endpoints)
    generation = Generation(
        max_tokens=tuning.max_tokens,
        temperature=tuning.temperature,
        output_mode=tuning.output_mode,
        seed=tuning.seed,
        reasoning_effort=spec.reasoning_effort,
    )
    answer_tokens = generation.max_tokens + generation.thinking_tokens()
    return LLMJudge(
        endpoint=endpoints[0],
        plan=attrs.evolve(plan, context_tokens=window, answer_tokens=answer_tokens),
        generation=generation,
        policy=tuning.policy,
        samples=spec.samples,
        timeout_s=judge.timeout_s,
        arguments=arguments,
        panel=tuple(endpoints) if spec.panel else (),
        panel_rule=panel_rule,
        criteria=criteria,
        guard=guard,
        prices=tuple(find_price(endpoint.model, tables) for endpoint in endpoints),
        prompt_sha256=prompt_digest(plan),
        individual=spec.mode == "individual",
    )


def prompt_digest(plan: PromptPlan) -> str:
    """sha256 of what the prompt asks whatever the case: the template, the reference
    files, and the answer's form (scale, criteria), as the calibration report names it."""
    scale = plan.scale
    described: dict[str, Any] = {
        "template": plan.template.source,
        "references": [[reference.name, reference.text] for reference in plan.references],
        "scale": scale.describe(),
        "schema": scale.schema(),
        "output_mode": plan.output_mode,
    }
    if plan.solution:  # only then: the digests of the judges without one stay as they were
        described["solution"] = [[reference.name, reference.text] for reference in plan.solution]
    if plan.files is not None:
        described["files"] = [str(path) for path in plan.files]
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def _criteria_form(
    judge: JudgeConfig, spec: LLMSpec, scale: AnswerScale, at: Locator
) -> CriteriaForm:
    """The criteria's form; a rule that cannot give a value on the judge's scale is refused."""
    rule = spec.aggregate or ("all-pass" if scale.kind == "pass_fail" else "weighted-mean")
    where = at.child("aggregate" if spec.aggregate else "criteria")
    if rule not in PASS_RULES and scale.kind == "pass_fail":
        raise where.error(
            f"{rule} gives a fraction and this judge is pass/fail (feedback_type: bool); "
            f"use one of {', '.join(sorted(PASS_RULES))}"
        )
    if rule not in PASS_RULES and judge.feedback_type == "int":
        raise where.error(
            f"{rule} gives a fraction and this judge's values are whole (feedback_type: int); "
            "use feedback_type: float, or a pass rule"
        )
    if rule in ("weighted-mean", "threshold") and not any(c.weight > 0 for c in spec.criteria):
        raise at.child("criteria").error(f"{rule} needs a criterion with a weight above 0")
    return CriteriaForm(spec.criteria, rule, spec.threshold or 0.5, scale)


def _panel_rule(judge: JudgeConfig, spec: LLMSpec, scale: AnswerScale, at: Locator) -> str:
    rule = spec.panel_aggregate or panel.default_rule(scale)
    where = at.child("panel" if spec.aggregate is not None or spec.criteria else "aggregate")
    if spec.panel_aggregate is None:
        return rule
    if rule == "mean" and not spec.criteria:
        if scale.kind == "pass_fail":
            raise where.error("mean of pass/fail answers is a fraction; use majority or min")
        if judge.feedback_type == "int":
            raise where.error(
                "mean of whole numbers is a fraction (feedback_type: int); "
                "use median, majority or min"
            )
    return rule


def _builtin_arguments(judge: JudgeConfig, name: str, at: Locator) -> dict[str, Any]:
    """An LLM builtin's arguments, checked and defaulted; like the reference, it is graded
    pass/fail, so a feedback_type or score_range would be silently ignored: refused."""
    from verifier.judges.builtins import find_builtin

    if judge.feedback_type not in (None, "bool") or judge.score_range is not None:
        key = "score_range" if judge.score_range is not None else "feedback_type"
        raise at.child(key).error(f"builtin {name} is graded pass/fail; remove {key}")
    found = find_builtin(name)
    assert found is not None
    return attrs.asdict(found.bind(judge.arguments, at.child("arguments")), recurse=False)


def resolve_model(
    spec: LLMSpec | MemberSpec, config: EvalConfig, environ: Mapping[str, str], at: Locator
) -> tuple[Provider, str]:
    """(provider, model name as sent): the judge's model, else models.judge, else the env.

    A `provider:` key wins and the model is then sent verbatim (a vLLM model may
    well be called `openai/gpt-oss-20b`); otherwise a provider-name prefix
    (`openai/`, `anthropic/`) picks the provider and is dropped, and an unprefixed
    name goes to the provider whose model_prefixes it starts with (`claude`),
    else to the first provider (OpenAI-compatible).
    """
    name = (spec.model or config.default_model or environ.get(MODEL_ENV, "")).strip()
    if not name:
        raise MissingModelError(at.source, at.child("model").key, MODEL_ENV)
    if spec.provider is not None:
        return PROVIDERS_BY_ALIAS[spec.provider], name
    prefix, _, rest = name.partition("/")
    for provider in PROVIDERS:
        if prefix == provider.name and rest:
            return provider, rest
    for provider in PROVIDERS:
        if any(name.lower().startswith(prefix) for prefix in provider.model_prefixes):
            return provider, name
    return PROVIDERS[0], name


def _references(
    paths: tuple[PurePosixPath, ...], config: EvalConfig, at: Locator
) -> tuple[Reference, ...]:
    references = []
    for relative in paths:
        path = config.base_dir / relative
        try:
            size = path.stat().st_size
            if size > MAX_CONTEXT_BYTES:
                raise at.error(f"{path} is {size} bytes; the limit is {MAX_CONTEXT_BYTES}")
            references.append(Reference(name=str(relative), text=path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as error:
            raise at.error(f"{path} cannot be read: {error}") from None
    return tuple(references)


def _case_files(
    spec: LLMSpec, config: EvalConfig, placed: bool, at: Locator
) -> tuple[PurePosixPath, ...] | None:
    """`files`: what of the record the appended material shows; each must be in the
    record (eval.yaml's outputs cover it), and a template that places the material
    itself has nothing appended to select from."""
    if spec.files is None:
        return None
    if placed:
        raise at.error(
            "selects the material appended to the rubric, and this prompt template places "
            "the case's material itself: remove one"
        )
    outputs = [PurePosixPath(output) for output in config.outputs]
    for path in spec.files:
        if outputs and not any(output == path or output in path.parents for output in outputs):
            raise at.error(
                f"{str(path)!r} is not among eval.yaml's outputs, which the judge's record "
                "holds: add it there"
            )
    return spec.files


def _solution(
    reference: PurePosixPath | None, config: EvalConfig, at: Locator
) -> tuple[Reference, ...]:
    """`reference`: its file, or the files directly in its dir (dot-files aside, as
    rewardkit reads one), each read now as the context files are."""
    if reference is None:
        return ()
    path = config.base_dir / reference
    if not path.is_dir():
        return _references((reference,), config, at)
    files = sorted(
        reference / child.name
        for child in path.iterdir()
        if child.is_file() and not child.name.startswith(".")
    )
    if not files:
        raise at.error(f"{path} has no files to compare with")
    return _references(tuple(files), config, at)


def _base_url(provider: Provider, environ: Mapping[str, str], at: Locator) -> str:
    variable = provider.base_url_env
    url = environ.get(variable, "").strip() or provider.default_base_url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise at.child("model").error(f"${variable} {redact(url)!r} is not an http(s) URL")
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
    prices, prices_file = _prices_file(environ)
    seed_text = environ.get("VERIFIER_LLM_SEED", "").strip()
    seed = (
        int(_number(environ, "VERIFIER_LLM_SEED", 0, minimum=0, whole=True)) if seed_text else None
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
        seed=seed,
        context_tokens=int(
            _number(environ, "VERIFIER_LLM_CONTEXT_TOKENS", 0, minimum=1024, whole=True)
        )
        or None,
        prices=prices,
        prices_file=prices_file,
    )


def _prices_file(environ: Mapping[str, str]) -> tuple[Mapping[str, PriceSpec], str | None]:
    """The prices in $VERIFIER_LLM_PRICES's file (YAML or JSON), and its path."""
    from verifier.judges.llm.entry_keys import parse_prices
    from verifier.yaml_io import read_yaml

    text = environ.get(PRICES_ENV, "").strip()
    if not text:
        return {}, None
    try:
        document = read_yaml(Path(text), missing="file not found")
    except ConfigError as error:
        raise ConfigError("environment", PRICES_ENV, error.message) from None
    return parse_prices(document, Locator(text, "", Path(text).parent)), text


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
