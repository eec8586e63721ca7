"""The [verifier] settings of a package's task.toml, derived from its eval.yaml.

- Time. Harbor kills a verifier that overruns `[verifier] timeout_sec` and records no
  reward at all, the worst outcome for training. So the timeout is derived from what
  can run: the sum of the timeouts of the judges a verifier grades (each step's own
  under `[steps.verifier]`), plus GRADE_SLACK_S for the grader's own work, is the
  deadline passed as VERIFIER_DEADLINE (the grade stops judges still running when it
  nears and writes the reward before it); HARBOR_SLACK_S more is the timeout (what
  Harbor's verify phase spends besides the grade: its execs of rm, chmod and
  test.sh, and copying the files back; harbor_margin_s).
- Network. No judge needs it unless it asks a model: then `no-network`. LLM judges
  need their endpoint: `allowlist` with its host when init can tell it (the judge's
  model, else $EVAL_JUDGE_MODEL, and the provider's base URL variable, else its
  default), and the [verifier] env pins that base URL and passes the API key from the
  host; otherwise `public`. Harbor enforces both restricted modes only where its
  egress control runs (docker and podman: a sidecar image from a registry and a kernel
  with nftables' fib match); elsewhere such a task fails at start, naming the mode.
- User. A judge that runs code from the case (a command) is sandboxed as another
  user than the grader only when the grader is root: then `user = "root"`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from urllib.parse import urlsplit

import attrs

from verifier.config import EvalConfig, JudgeConfig, load_config
from verifier.errors import ConfigError
from verifier.judges.builtins import find_builtin
from verifier.judges.kinds import KINDS
from verifier.judges.llm.from_spec import resolve_model

GRADE_SLACK_S = 30.0
# Harbor's verify phase past the deadline on a loaded node, doubled: bench/deadline.py
# measured up to 28 s on 2 cores with 16 busy processes (podman-compose's execs of rm,
# chmod and test.sh, the copy back), up to 3.3 s idle (docs/harbor.md).
HARBOR_SLACK_S = 60.0
DEFAULT_TIMEOUT_S = 600.0  # Harbor's own, when eval.yaml cannot be read


def harbor_margin_s(timeout_s: float) -> float:
    """How far below Harbor's timeout a deadline must be for the reward to land before
    Harbor kills the verifier on a loaded node: HARBOR_SLACK_S, or 5% of a long one."""
    return max(HARBOR_SLACK_S, 0.05 * timeout_s)


@attrs.frozen
class StepTime:
    timeout_s: float  # [verifier] timeout_sec (or [steps.verifier])
    deadline_s: float | None  # VERIFIER_DEADLINE; None: unknown (eval.yaml invalid)


@attrs.frozen
class Network:
    mode: str  # no-network | allowlist | public
    allowed_hosts: tuple[str, ...] = ()
    why: str = ""  # the comment task.toml gets
    env: Mapping[str, str] = MappingProxyType({})  # [verifier] env the endpoint needs


@attrs.frozen
class VerifierSettings:
    time: StepTime  # the task's (single-step: its only verifier; multi-step: unused)
    step_times: Mapping[str, StepTime]  # per step id
    network: Network
    user: str | None  # [verifier] user; None: the image's


# When eval.yaml does not load (the package is still written; every trial records a
# verifier error): Harbor's own timeout, no deadline, nothing that needs a network.
UNLOADED = VerifierSettings(
    StepTime(DEFAULT_TIMEOUT_S, None),
    MappingProxyType({}),
    Network("no-network", why="eval.yaml does not load, so no judge runs"),
    None,
)


def verifier_settings(
    config_path: Path, network: str = "auto", environ: Mapping[str, str] | None = None
) -> VerifierSettings:
    """The settings for eval.yaml at config_path (defaults when it does not load: the
    package is still written, and every trial records a verifier error)."""
    environ = os.environ if environ is None else environ
    try:
        config = load_config(config_path, KINDS)
    except ConfigError:
        return attrs.evolve(UNLOADED, network=_network(None, network, environ))
    steps = {step: step_time(config.judges, config.step_judges(step)) for step in config.step_ids}
    return VerifierSettings(
        time=step_time(config.judges, tuple(judge.name for judge in config.judges)),
        step_times=steps,
        network=_network(config, network, environ),
        user="root" if any(_runs_case_code(judge) for judge in config.judges) else None,
    )


def step_time(judges: tuple[JudgeConfig, ...], names: tuple[str, ...]) -> StepTime:
    """The deadline and timeout of a verifier that grades the judges named."""
    total = sum(judge.timeout_s for judge in judges if judge.name in names)
    deadline = math.ceil(total + GRADE_SLACK_S)
    return StepTime(float(deadline + HARBOR_SLACK_S), float(deadline))


def _runs_case_code(judge: JudgeConfig) -> bool:
    if judge.kind != "builtin":
        return False
    found = find_builtin(judge.spec.name)
    return found is not None and found.runs_case_code


def _network(config: EvalConfig | None, asked: str, environ: Mapping[str, str]) -> Network:
    llm = [judge for judge in config.judges if judge.kind == "llm"] if config else []
    endpoints = _endpoints(config, llm, environ) if config else Network("no-network")
    if asked == "public":
        return attrs.evolve(
            endpoints, mode="public", allowed_hosts=(), why="asked for (--verifier-network public)"
        )
    if asked == "no-network" or not llm:
        why = "asked for" if asked == "no-network" else "no judge asks a model"
        return Network("no-network", why=why if config else UNLOADED.network.why)
    return endpoints


def _endpoints(config: EvalConfig, llm: list[JudgeConfig], environ: Mapping[str, str]) -> Network:
    """The LLM judges' endpoints allow-listed, with the [verifier] env that points the
    judges at them and passes their API key from the host; `public` when one cannot
    be told before grading."""
    hosts, env = [], {}
    for judge in llm:
        try:
            provider, _ = resolve_model(judge.spec, config, environ, config.locator(judge.key))
        except ConfigError:
            return Network(
                "public",
                why=f"{judge.name} asks a model that is only known when grading "
                "($EVAL_JUDGE_MODEL): its endpoint cannot be allow-listed",
            )
        url = environ.get(provider.base_url_env, "").strip() or provider.default_base_url
        host = urlsplit(url).hostname
        if urlsplit(url).scheme not in ("http", "https") or not host:
            return Network("public", why=f"${provider.base_url_env} {url!r} is not a URL")
        hosts.append(host)
        env[provider.base_url_env] = url
        for variable in provider.key_env[:1]:
            env[variable] = "${" + variable + "}"
    return Network(
        "allowlist",
        tuple(dict.fromkeys(hosts)),
        why="LLM judges reach their endpoint, and nothing else",
        env=env,
    )
