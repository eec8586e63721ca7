"""`verifier task test DEST`: a package graded before it is published, as Harbor would.

With the engine (podman or docker), it builds the package's two images the way Harbor
builds them (environment/ for the agent, or [environment].docker_image; tests/ for
the verifier), then grades two cases in the verifier's image, each with its own
container and nothing shared:

- untouched: the agent's work dir as the environment image has it (what an agent that
  does nothing leaves; with an --agent-image package, environment/ uploaded into it);
- solution: the same after solution/solve.sh (each step's, for a multi-step package)
  ran in the environment's container, as Harbor's oracle agent runs it.

The verifier runs /tests/test.sh with task.toml's [verifier] env (${HOST_VAR} from
this environment, as Harbor resolves it) and user, without network unless task.toml
gives the verifier one. The package passes when the solution's reward is the expected
one (1.0 unless --expect; to the 4 significant digits shown) and the untouched case's
is lower: a task whose untouched
environment already scores is no task, and one whose solution cannot reach its reward
teaches nothing.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import tempfile
import tomllib
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from verifier.errors import UsageError, VerifierError
from verifier.task.workdir_toolchain import IMAGE_PROBE, probe_findings

_TEMPLATE = re.compile(r"\$\{([^}:]+)(?::-(.*))?\}")  # Harbor's (harbor/utils/env.py)
_BUILD_TIMEOUT_S = 1800.0
_TAIL_LINES = 12
_LOGS = "/logs/verifier"


class PackageFailed(VerifierError):
    """The package does not do what it should: a build, the solution, or a reward.
    `judges`: the judges of the case that shows it, for the report."""

    def __init__(self, message: str, judges: tuple[JudgeLine, ...] = ()) -> None:
        super().__init__(message)
        self.judges = judges


@attrs.frozen
class Step:
    name: str | None  # None: a single-step package
    solution: Path  # the dir holding solve.sh
    verifier_env: Mapping[str, str]
    timeout_s: float  # the verifier's
    agent_timeout_s: float


@attrs.frozen
class Package:
    dest: Path
    name: str
    workdir: str  # the agent's work dir: the first artifact
    agent_image: str | None  # [environment].docker_image
    exec_workdir: str | None  # [environment].workdir
    agent_user: str | None
    verifier_user: str | None
    verifier_workdir: str | None  # [verifier.environment].workdir: Harbor's exec dir
    verifier_network: bool  # whether the verifier's network mode lets it reach out
    steps: tuple[Step, ...]


@attrs.frozen
class JudgeLine:
    """One judge of a graded case, from judges.json."""

    name: str
    value: object
    status: str
    rationale: str
    error: str


@attrs.frozen
class Graded:
    label: str
    reward: float
    output: str  # test.sh's output
    judges: tuple[JudgeLine, ...] = ()


def read_package(dest: Path) -> Package:
    """task.toml's settings for the test; UsageError naming what is missing."""
    path = Path(dest) / "task.toml"
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"{dest}: no task.toml (make the package with `verifier task init`)"
        ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise UsageError(f"{path}: cannot be read: {error}") from None
    artifacts = config.get("artifacts") or []
    first = artifacts[0] if artifacts else None
    workdir = first.get("source") if isinstance(first, dict) else first
    if not isinstance(workdir, str) or not workdir.startswith("/"):
        raise UsageError(f'{path}: artifacts: name the agent\'s work dir first (e.g. "/app")')
    environment = _table(config, "environment")
    agent, verifier = _table(config, "agent"), _table(config, "verifier")
    env = {str(k): str(v) for k, v in _table(verifier, "env").items()}
    timeout = float(verifier.get("timeout_sec", 600.0))
    agent_timeout = float(agent.get("timeout_sec", 600.0))
    steps: list[Step] = []
    for entry in config.get("steps") or []:
        name, step_verifier = str(entry["name"]), _table(entry, "verifier")
        step_env = {str(k): str(v) for k, v in _table(step_verifier, "env").items()}
        steps.append(
            Step(
                name=name,
                solution=Path(dest) / "steps" / name / "solution",
                verifier_env={**env, **step_env},
                timeout_s=float(step_verifier.get("timeout_sec", 600.0)),
                agent_timeout_s=float(_table(entry, "agent").get("timeout_sec", agent_timeout)),
            )
        )
    if not steps:
        steps.append(Step(None, Path(dest) / "solution", env, timeout, agent_timeout))
    network = verifier.get("network_mode", "public")
    return Package(
        dest=Path(dest),
        name=str(_table(config, "task").get("name", Path(dest).name)),
        workdir=workdir.rstrip("/") or "/",
        agent_image=environment.get("docker_image"),
        exec_workdir=environment.get("workdir"),
        agent_user=_user(agent.get("user")),
        verifier_user=_user(verifier.get("user")),
        verifier_workdir=_table(verifier, "environment").get("workdir"),
        verifier_network=network != "no-network",
        steps=tuple(steps),
    )


def resolve_env(env: Mapping[str, str], environ: Mapping[str, str], where: str) -> dict[str, str]:
    """[verifier] env with ${VAR} and ${VAR:-default} filled from environ, as Harbor does;
    UsageError for a variable that is unset and has no default (Harbor fails the trial)."""
    resolved = {}
    for key, value in env.items():
        match = _TEMPLATE.fullmatch(value)
        if not match:
            resolved[key] = value
        elif match.group(1) in environ:
            resolved[key] = environ[match.group(1)]
        elif match.group(2) is not None:
            resolved[key] = match.group(2)
        else:
            raise UsageError(
                f"{where}: [verifier] env {key} needs ${match.group(1)}, which is unset"
            )
    return resolved


def _table(document: object, key: str) -> dict[str, Any]:
    value = document.get(key) if isinstance(document, dict) else None
    return value if isinstance(value, dict) else {}


def _user(value: object) -> str | None:
    return None if value is None else str(value)


class Engine:
    """The engine's command line; every call has a timeout and its output captured."""

    def __init__(self, name: str, network: str | None = None) -> None:
        self.name = name
        self.network = network

    def __call__(self, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                [self.name, *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except FileNotFoundError:
            raise UsageError(f"--engine {self.name}: not installed") from None
        except subprocess.TimeoutExpired:
            raise PackageFailed(f"{self.name} {args[0]} took more than {timeout:.0f} s") from None

    def checked(self, what: str, *args: str, timeout: float = 300.0) -> str:
        run = self(*args, timeout=timeout)
        if run.returncode != 0:
            raise PackageFailed(
                f"{what} failed ({self.name} {args[0]}, exit {run.returncode}): "
                f"{_tail(run.stdout + run.stderr)}"
            )
        return run.stdout

    def build(self, what: str, tag: str, context: Path) -> None:
        network = ["--network", self.network] if self.network else []
        pull = ["--pull=never"] if self.name == "podman" else []
        self.checked(
            f"building {what} ({context})",
            "build",
            *pull,
            *network,
            "-t",
            tag,
            str(context),
            timeout=_BUILD_TIMEOUT_S,
        )


def reward_matches(reward: float, expect: float) -> bool:
    """Whether the solution's reward is --expect to the 4 significant digits `task test`
    prints them with: a 2-of-3 solution's 0.666...7 is the 0.6667 it shows."""
    return f"{reward:.4g}" == f"{expect:.4g}"


def test_package(
    package: Package,
    engine: Engine,
    expect: float,
    environ: Mapping[str, str],
    report: Callable[[str], None],
) -> tuple[Graded, Graded]:
    """Build, grade the untouched case and the solution; PackageFailed unless the
    solution gets `expect` and the untouched case less."""
    for step in package.steps:
        if not (step.solution / "solve.sh").is_file():
            raise UsageError(f"{step.solution / 'solve.sh'}: missing (the oracle's solution)")
        resolve_env(step.verifier_env, environ, str(package.dest / "task.toml"))
    run_id = uuid.uuid4().hex[:10]
    tag = f"localhost/verifier-task-test-{run_id}"
    agent_image = package.agent_image or f"{tag}:environment"
    verifier_image = f"{tag}:verifier"
    built = []
    try:
        if package.agent_image is None:
            report(f"building the environment: {package.dest / 'environment'}")
            engine.build("the environment", agent_image, package.dest / "environment")
            built.append(agent_image)
        report(f"building the verifier: {package.dest / 'tests'}")
        engine.build("the verifier", verifier_image, package.dest / "tests")
        built.append(verifier_image)
        with tempfile.TemporaryDirectory(prefix="verifier-task-test-") as scratch:
            root = Path(scratch)
            cases = _run_agent(package, engine, agent_image, root, run_id)
            untouched = _grade(
                package,
                engine,
                verifier_image,
                cases[0],
                package.steps[-1],
                root / "untouched",
                label="untouched",
                environ=environ,
            )
            report(f"untouched environment: reward {untouched.reward:.4g}")
            solved = untouched
            for step, case in zip(package.steps, cases[1:], strict=True):
                label = f"solution step {step.name}" if step.name else "solution"
                out = root / f"out-{step.name or 'solution'}"
                solved = _grade(
                    package, engine, verifier_image, case, step, out, label=label, environ=environ
                )
                report(f"{label}: reward {solved.reward:.4g}")
    finally:
        for image in built:
            engine("rmi", "--force", image)
    if not reward_matches(solved.reward, expect):
        raise PackageFailed(
            f"the solution gets {solved.reward:.4g}, not the expected {expect:.4g}",
            solved.judges,
        )
    if untouched.reward >= solved.reward:
        raise PackageFailed(
            f"the untouched environment gets {untouched.reward:.4g}, as much as the solution: "
            "an agent that does nothing is rewarded",
            untouched.judges,
        )
    return untouched, solved


def _run_agent(package: Package, engine: Engine, image: str, root: Path, run_id: str) -> list[Path]:
    """[the untouched work dir, the work dir after each step's solve.sh], copied out of
    one container of the environment image, as Harbor's oracle agent leaves them."""
    container = f"verifier-task-test-{run_id}"
    network = ["--network", engine.network] if engine.network else []
    user = ["--user", package.agent_user] if package.agent_user else []
    workdir = ["--workdir", package.exec_workdir] if package.exec_workdir else []
    # `sleep infinity` as PID 1 ignores SIGTERM: with the default stop signal, podman's
    # `rm --force` below would wait out its 10 s stop timeout before it kills. The
    # image's ENTRYPOINT stays, as Harbor's compose keeps it (what it sets up is there).
    engine.checked(
        "starting the environment",
        "run",
        "-d",
        "--name",
        container,
        *network,
        *workdir,
        "--stop-signal",
        "KILL",
        image,
        "sh",
        "-c",
        "sleep infinity",
    )
    try:
        if package.agent_image is not None and _uploads_environment(package.dest):
            engine.checked(
                "uploading environment/",
                "exec",
                "--user",
                "root",
                container,
                "mkdir",
                "-p",
                package.workdir,
            )
            engine.checked(
                "uploading environment/",
                "cp",
                f"{package.dest / 'environment'}/.",
                f"{container}:{package.workdir}",
            )
        _refuse_toolchain(engine, container, package.workdir)
        cases = [_copy_out(engine, container, package.workdir, root / "case-untouched")]
        for index, step in enumerate(package.steps):
            engine.checked(
                "uploading the solution",
                "exec",
                "--user",
                "root",
                container,
                "sh",
                "-c",
                "rm -rf /solution && mkdir -p /solution",
            )
            engine.checked(
                "uploading the solution", "cp", f"{step.solution}/.", f"{container}:/solution"
            )
            run = engine(
                "exec", *user, container, "bash", "/solution/solve.sh", timeout=step.agent_timeout_s
            )
            if run.returncode != 0:
                raise PackageFailed(
                    f"{step.solution / 'solve.sh'} exits {run.returncode}: "
                    f"{_tail(run.stdout + run.stderr)}"
                )
            cases.append(_copy_out(engine, container, package.workdir, root / f"case-{index}"))
        return cases
    finally:
        engine("rm", "--force", container)


def _refuse_toolchain(engine: Engine, container: str, workdir: str) -> None:
    """PackageFailed when the environment's toolchain is in the agent's work dir (its
    PATH, VIRTUAL_ENV, ..., or where its PATH finds python3, go, node): the case takes
    that dir's place when the tests run (verifier.task.workdir_toolchain). An image without sh
    is not probed."""
    run = engine("exec", container, "sh", "-c", IMAGE_PROBE)
    findings = probe_findings(run.stdout, workdir) if run.returncode == 0 else []
    if findings:
        raise PackageFailed(f"the environment's toolchain: {findings[0].message(workdir)}")


def _uploads_environment(dest: Path) -> bool:
    """Harbor uploads a docker_image task's non-empty environment/ into its work dir."""
    environment = dest / "environment"
    return environment.is_dir() and any(environment.iterdir())


def _copy_out(engine: Engine, container: str, workdir: str, target: Path) -> Path:
    """The container's work dir as a case dir (empty when the image has none), world-
    writable at its root as Harbor leaves the verifier's copy."""
    target.mkdir()
    listed = engine("exec", "--user", "root", container, "test", "-d", workdir)
    if listed.returncode == 0:
        engine.checked(f"copying {workdir} out", "cp", f"{container}:{workdir}/.", str(target))
    target.chmod(0o777)
    return target


def _grade(
    package: Package,
    engine: Engine,
    image: str,
    case: Path,
    step: Step,
    out: Path,
    *,
    label: str,
    environ: Mapping[str, str],
) -> Graded:
    """Grade `case` as Harbor's separate verifier does (trial/trial.py,
    verifier/verifier.py): a container of the verifier's image kept alive with `sleep
    infinity` (its ENTRYPOINT as it is), /logs/verifier emptied, the case re-created at
    the work dir (emptied first, then copied in: the image's own files there are gone),
    then, as [verifier].user with [verifier] env, `(/tests/test.sh) > test-stdout.txt`
    from the image's working dir (or [verifier.environment] workdir)."""
    out.mkdir()
    out.chmod(0o777)  # whoever the verifier's user is
    env = resolve_env(step.verifier_env, environ, str(package.dest / "task.toml"))
    flags = [item for key, value in env.items() for item in ("--env", f"{key}={value}")]
    user = ["--user", package.verifier_user] if package.verifier_user else []
    workdir = ["--workdir", package.verifier_workdir] if package.verifier_workdir else []
    network = (
        (["--network", engine.network] if engine.network else [])
        if (package.verifier_network)
        else ["--network", "none"]
    )
    container = f"verifier-task-test-{uuid.uuid4().hex[:10]}"
    engine.checked(
        f"starting the verifier ({label})",
        "run",
        "-d",
        "--name",
        container,
        *network,
        "--stop-signal",
        "KILL",
        "-v",
        f"{out}:/logs/verifier",
        image,
        "sh",
        "-c",
        "sleep infinity",
    )
    try:
        as_root = ("exec", "--user", "root", *workdir, container, "bash", "-c")
        engine.checked(
            f"{label}: Harbor's reset of /logs/verifier and {package.workdir} in the verifier's "
            "container",
            *as_root,
            f"{_emptied('/logs/verifier')} && {_emptied(package.workdir)}",
        )
        engine.checked(
            f"{label}: Harbor's upload of the case into {package.workdir} in the verifier's "
            "container",
            "cp",
            f"{case}/.",
            f"{container}:{package.workdir}",
        )
        engine.checked(
            f"{label}: Harbor's chmod of /tests/test.sh in the verifier's container",
            *as_root,
            "chmod +x /tests/test.sh && rm -f /logs/verifier/reward.txt /logs/verifier/reward.json",
        )
        run = engine(
            "exec",
            *user,
            *workdir,
            *flags,
            container,
            "bash",
            "-c",
            f"(/tests/test.sh) > {_LOGS}/test-stdout.txt 2>&1",
            timeout=step.timeout_s,
        )
    finally:
        engine("rm", "--force", container)
    stdout = out / "test-stdout.txt"
    if not stdout.is_file():  # the exec itself failed, as Harbor's would
        raise PackageFailed(
            f"{label}: Harbor's exec of /tests/test.sh fails in the verifier's container: "
            f"{_tail(run.stdout + run.stderr)}"
        )
    output = stdout.read_text(encoding="utf-8", errors="replace")
    judges = read_judges(out / "judges.json")
    try:
        rewards = json.loads((out / "reward.json").read_text(encoding="utf-8"))
        reward = float(rewards["reward"])
    except (OSError, ValueError, KeyError, TypeError):
        raise PackageFailed(
            f"{label}: the verifier wrote no reward: {_tail(output)}", judges
        ) from None
    return Graded(label, reward, output, judges)


def _emptied(path: str) -> str:
    """Harbor's `empty_dirs` (environments/base.py): the dir made empty, not replaced."""
    quoted = shlex.quote(path)
    not_a_dir = f"[ -L {quoted} ] || {{ [ -e {quoted} ] && [ ! -d {quoted} ]; }}"
    return (
        f"if {not_a_dir}; then rm -rf {quoted}; fi && mkdir -p {quoted}"
        f" && find {quoted} -mindepth 1 -maxdepth 1 -exec rm -rf -- {{}} + && chmod 777 {quoted}"
    )


def read_judges(path: Path) -> tuple[JudgeLine, ...]:
    """Each judge of judges.json as task test reports it on failure (none when the
    file is missing or unusable: the grade wrote no outputs)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    per_judge = document.get("per_judge") if isinstance(document, dict) else None
    if not isinstance(per_judge, dict):
        return ()
    lines = []
    for name, entry in per_judge.items():
        if not isinstance(entry, dict):
            continue
        lines.append(
            JudgeLine(
                name=str(name),
                value=entry.get("value"),
                status=str(entry.get("status", "")),
                rationale=str(entry.get("rationale") or ""),
                error=str(entry.get("error") or ""),
            )
        )
    return tuple(lines)


def describe_judges(judges: tuple[JudgeLine, ...], tail_lines: int = _TAIL_LINES) -> list[str]:
    """Each judge's value (or status), error, and the end of its rationale, where a
    command judge puts the decisive tail of its output."""
    lines = []
    for judge in judges:
        value = json.dumps(judge.value)
        shown = value if judge.status == "ok" else f"{judge.status} ({value})"
        lines.append(f"  {judge.name}: {shown}")
        if judge.error:
            lines.append(f"    error: {judge.error}")
        rationale = [line for line in judge.rationale.splitlines() if line.strip()]
        lines += [f"    {line}" for line in rationale[-tail_lines:]]
    return lines


def _tail(text: str, lines: int = _TAIL_LINES) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept) if kept else "(no output)"


def default_engine(available: Callable[[str], str | None]) -> str:
    """podman when installed, else docker (as the Makefile picks)."""
    for name in ("podman", "docker"):
        if available(name):
            return name
    raise UsageError("task test: neither podman nor docker is installed (--engine)")
