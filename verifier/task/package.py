"""One Harbor task package on disk, rendered from task-templates/.

Whatever asks for a package (`task init` for one eval.yaml, `task init --from-dataset`
for each dataset case, either of them single- or multi-step) describes it as a
PackageSpec; write_package is the one place that renders the templates and copies
files, so every package has the same layout and the same guarantees: files readable
by the verifier's non-root user, scripts executable, nothing left from a template
placeholder.

With an environment (`--environment DIR`, verifier.task.environment), environment/ is
DIR's copy and tests/Dockerfile builds the verifier's image from it; without one,
environment/Dockerfile is a placeholder (or there is none with `--agent-image`) and
tests/Dockerfile builds FROM the verifier image. Every file goes through a
PackageWriter (verifier.task.record): writing a package again never overwrites a
file its author edited.

A multi-step package (schema 1.4) has a `[[steps]]` entry per step in task.toml and
`steps/<id>/instruction.md` and `steps/<id>/solution/solve.sh` instead of the root
instruction.md and solution/. Every step's verifier is built from the same tests/
(tests/Dockerfile; a step's own tests/ would come first) and told its step by
`[steps.verifier] env = {VERIFIER_STEP = ...}`; `multi_step_reward_strategy =
"final"` makes the last step's reward, which the eval's reward block composes, the
trial's (verifier.grading.step_plan). Each step's verifier gets its own timeout and
deadline (its judges'), and a step other than the last may stop the trial when its
reward is below `min_reward`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from types import MappingProxyType

import attrs

from verifier.errors import UsageError
from verifier.references import TASK_INPUT_FILE, walk_files
from verifier.task.environment import (
    CONTEXT_IN_TESTS,
    DOCKERFILE,
    DOCKERIGNORE,
    Environment,
    context_copy,
    verifier_dockerfile,
)
from verifier.task.record import Kept, PackageWriter
from verifier.task.settings import UNLOADED, StepTime, VerifierSettings
from verifier.task.tests_dir import TestsFile, TestsPlan

PROTECTED_DIR = "protected"  # tests/protected/: the trusted copies of `task init --protect`
_PLACEHOLDER_RE = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")
DEFAULT_AGENT_TIMEOUT_S = 900.0
# Harbor's own pattern for [task].name (harbor.constants.ORG_NAME_PATTERN).
NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$")
# A workdir that needs no quoting in TOML, sh or a Dockerfile.
_WORKDIR_RE = re.compile(r"^(/[A-Za-z0-9._-]+)+/?$")
_IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
# Container paths the verifier or Harbor own: the agent's work must not land there.
_RESERVED_DIRS = ("/tests", "/logs", "/solution", "/case", "/opt/verifier", "/grading")


@attrs.frozen
class StepSpec:
    id: str
    instruction: str
    timeout_s: float | None  # the agent's time for the step (None: the task's)
    min_reward: float | None = None  # below it, the trial stops after this step


@attrs.frozen
class PackageSpec:
    """Everything that differs between two packages."""

    dest: Path
    name: str  # [task].name, org/name
    image: str  # the verifier image tests/Dockerfile builds FROM
    agent_image: str | None  # [environment].docker_image; None: environment/Dockerfile
    workdir: str  # the agent's work dir: the artifact, and the verifier's case
    tests: TestsPlan
    instruction: str  # instruction.md (a multi-step package has one per step instead)
    task_input: str | None = None  # tests/input.yaml; None: none written
    steps: tuple[StepSpec, ...] = ()
    agent_files: tuple[TestsFile, ...] = ()  # environment/ files, put in the agent's workdir
    verifier_env: Mapping[str, str] = MappingProxyType({})  # besides VERIFIER_CASE
    metadata: Mapping[str, str] = MappingProxyType({})  # [metadata] besides the verifier
    agent_timeout_s: float = DEFAULT_AGENT_TIMEOUT_S
    protected: tuple[TestsFile, ...] = ()  # agent files copied to tests/protected/ (--protect)
    environment: Environment | None = None  # --environment: the agent's and the verifier's
    settings: VerifierSettings = UNLOADED  # task.toml's [verifier] settings


def write_package(spec: PackageSpec) -> list[Kept]:
    """Render the templates and copy the files of `spec` into spec.dest; return the
    files kept because their author changed them (verifier.task.record)."""
    dest = spec.dest
    values = _template_values(spec)
    root = templates_dir()
    dest.mkdir(parents=True, exist_ok=True)
    writer = PackageWriter(dest)
    for template in sorted(walk_files(root)):
        relative = template.relative_to(root)
        if (spec.agent_image or spec.environment) and relative.parts[0] == "environment":
            continue
        text = render(template.read_text(encoding="utf-8"), values)
        if relative == Path("instruction.md"):
            text = spec.instruction
        if spec.environment is not None and relative == Path("tests", DOCKERFILE):
            text = _verifier_dockerfile(spec)
        executable = template.suffix == ".sh"
        if spec.steps and relative.parts[0] in ("instruction.md", "solution"):
            for step in spec.steps:
                step_text = step.instruction if relative.parts[0] == "instruction.md" else text
                writer.write_text(f"steps/{step.id}/{relative.as_posix()}", step_text, executable)
            continue
        writer.write_text(relative.as_posix(), text, executable)
    (dest / "environment").mkdir(exist_ok=True)
    if spec.environment is not None:
        _write_environment(writer, spec.environment)
    for file in spec.agent_files:
        target = dest / "environment" / file.relative
        if file.source.resolve() != target.resolve():  # already there: the author's own
            writer.copy(f"environment/{file.relative}", file.source)
    for file in spec.tests.files:
        if spec.protected and file.relative.parts[0] == PROTECTED_DIR:
            continue  # eval.yaml's own protected/ (for loading it alone): the package's rules
        writer.copy(f"tests/{file.relative}", file.source)
    for file in spec.protected:
        writer.copy(f"tests/{PROTECTED_DIR}/{file.relative}", file.source)
    if spec.task_input:
        writer.write_text(f"tests/{TASK_INPUT_FILE}", spec.task_input)
    return writer.finish()


def _write_environment(writer: PackageWriter, environment: Environment) -> None:
    """environment/ as DIR is, and tests/environment/ (with tests/.dockerignore) as the
    verifier's build reads it; executable bits kept (COPY keeps them in the image)."""
    writer.write_text(f"environment/{DOCKERFILE}", environment.dockerfile_text)
    for file in environment.files:
        writer.copy(f"environment/{file.relative}", file.source, _executable(file.source))
    for file in context_copy(environment):
        writer.copy(f"tests/{file.relative}", file.source, _executable(file.source))
    if environment.ignore.patterns:
        writer.write_text(f"tests/{DOCKERIGNORE}", environment.ignore.relocated(CONTEXT_IN_TESTS))


def _verifier_dockerfile(spec: PackageSpec) -> str:
    assert spec.environment is not None
    entries = [
        file.relative.as_posix()
        for file in spec.tests.files
        if not (spec.protected and file.relative.parts[0] == PROTECTED_DIR)
    ]
    entries += [f"{PROTECTED_DIR}/{file.relative}" for file in spec.protected]
    if spec.task_input:
        entries.append(TASK_INPUT_FILE)
    return verifier_dockerfile(spec.environment, spec.image, spec.workdir, entries)


def _executable(path: Path) -> bool:
    return bool(path.stat().st_mode & 0o111)


def _template_values(spec: PackageSpec) -> dict[str, str]:
    environment = ["# The agent's image is built from environment/Dockerfile."]
    if spec.agent_image:
        environment = [
            "# The agent's image (no environment/Dockerfile).",
            f"docker_image = {toml_str(spec.agent_image)}",
        ]
        if spec.agent_files:
            environment += [
                "# Harbor uploads environment/ (the case's inputs) into it.",
                f"workdir = {toml_str(spec.workdir)}",
            ]
    settings = spec.settings
    verifier_env = {"VERIFIER_CASE": spec.workdir, **settings.network.env, **spec.verifier_env}
    if not spec.steps and settings.time.deadline_s is not None:
        verifier_env["VERIFIER_DEADLINE"] = _seconds(settings.time.deadline_s)
    return {
        "name": spec.name,
        "name_toml": toml_str(spec.name),
        "workdir": spec.workdir,
        "workdir_toml": toml_str(spec.workdir),
        "image": spec.image,
        "environment_toml": "\n".join(environment),
        "verifier_env_toml": _inline_table(verifier_env),
        "verifier_timeout": repr(settings.time.timeout_s),
        "verifier_toml": _verifier_toml(settings),
        "verifier_image_note": "the task's environment with the verifier on top"
        if spec.environment is not None
        else "FROM the verifier image",
        "metadata_toml": "".join(f"\n{key} = {toml_str(v)}" for key, v in spec.metadata.items()),
        "agent_timeout": repr(float(spec.agent_timeout_s)),
        "root_toml": _root_toml(spec),
        "steps_toml": "".join(_step_toml(step, settings) for step in spec.steps),
        "environment_copy": "".join(
            f"\nCOPY {json.dumps([name, f'{spec.workdir}/{name}'])}"
            for name in _top_level(spec.agent_files)
        ),
    }


def _top_level(files: tuple[TestsFile, ...]) -> list[str]:
    """The top-level entries the files are in: one COPY each (a dir's COPY copies its
    contents, and names no test file, which `harbor lint` would take for a leak)."""
    return sorted({file.relative.parts[0] for file in files})


def _verifier_toml(settings: VerifierSettings) -> str:
    network = settings.network
    lines = [
        f"# Network: {network.why}." if network.why else "",
        f"network_mode = {toml_str(network.mode)}",
    ]
    if network.allowed_hosts:
        lines.append(f"allowed_hosts = {json.dumps(list(network.allowed_hosts))}")
    if settings.user is not None:
        lines += [
            "# A judge runs code from the case: as root, the grader runs it as another",
            "# user (the sandbox's), who cannot read /tests or signal the grader.",
            f"user = {toml_str(settings.user)}",
        ]
    return "".join(f"\n{line}" for line in lines if line)


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _root_toml(spec: PackageSpec) -> str:
    if not spec.steps:
        return ""
    return (
        "\n# One [[steps]] entry per step of eval.yaml's execution.steps, each graded by its\n"
        "# own verifier; the final step's composes the reward block: the trial's reward.\n"
        'multi_step_reward_strategy = "final"\n'
    )


def _step_toml(step: StepSpec, settings: VerifierSettings) -> str:
    lines = ["", "", "[[steps]]", f"name = {toml_str(step.id)}"]
    if step.min_reward is not None:
        lines.append(f"min_reward = {float(step.min_reward)!r}")
    if step.timeout_s is not None:
        lines += ["", "[steps.agent]", f"timeout_sec = {float(step.timeout_s)!r}"]
    time = settings.step_times.get(step.id, StepTime(settings.time.timeout_s, None))
    env = {"VERIFIER_STEP": step.id}
    if time.deadline_s is not None:
        env["VERIFIER_DEADLINE"] = _seconds(time.deadline_s)
    lines += [
        "",
        "[steps.verifier]",
        f"timeout_sec = {time.timeout_s!r}",
        f"env = {_inline_table(env)}",
    ]
    return "\n".join(lines)


def _inline_table(entries: Mapping[str, str]) -> str:
    return "{ " + ", ".join(f"{key} = {toml_str(value)}" for key, value in entries.items()) + " }"


def templates_dir() -> Path:
    """The task templates: package data when installed, task-templates/ in a checkout."""
    return data_dir("templates", "task-templates", "task.toml")


def data_dir(packaged: str, checkout: str, marker: str) -> Path:
    """A dir of package data: verifier/<packaged> when installed (in a checkout, a
    symlink to <checkout>), else the checkout's <checkout>; found by a file it holds."""
    try:
        installed = Path(str(resources.files("verifier") / packaged))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - zip imports
        installed = None
    if installed is not None and (installed / marker).is_file():
        return installed
    source = Path(__file__).resolve().parents[2] / checkout
    if (source / marker).is_file():
        return source
    raise FileNotFoundError(f"{checkout} not found: reinstall harbor-verifier")


def render(text: str, values: Mapping[str, str]) -> str:
    """Replace every {{name}}; an unknown name is a bug in the templates, not input."""

    def substitute(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"template placeholder {{{{{key}}}}} has no value")
        return values[key]

    return _PLACEHOLDER_RE.sub(substitute, text)


def toml_str(value: str) -> str:
    """A JSON string is a valid TOML basic string (DEL aside, which TOML wants escaped)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def check_arguments(workdir: str, image: str, agent_image: str | None) -> str:
    """The workdir as the package uses it; UsageError for a bad workdir or image."""
    for flag, value in (("--image", image), ("--agent-image", agent_image)):
        if value is not None and not _IMAGE_RE.match(value):
            raise UsageError(f"{flag} {value!r}: not an image reference")
    if not _WORKDIR_RE.match(workdir) or ".." in workdir.split("/"):
        raise UsageError(
            f"--workdir {workdir!r}: use an absolute path of letters, digits, '.', '_', '-'"
        )
    workdir = workdir.rstrip("/")
    for reserved in _RESERVED_DIRS:
        if (
            workdir == reserved
            or workdir.startswith(reserved + "/")
            or (reserved.startswith(workdir + "/"))
        ):
            raise UsageError(f"--workdir {workdir}: overlaps {reserved}, which the verifier uses")
    return workdir


def safe_name(text: str) -> str:
    """text as one part of a Harbor task name (letters, digits, '.', '_', '-')."""
    return re.sub(r"[^a-zA-Z0-9._-]+", "-", text).strip(".-_") or "task"


def check_dest(dest: Path, force: bool) -> None:
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"{dest} exists and is not a directory")
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise UsageError(f"{dest} is not empty: pass --force to overwrite the task's files")
