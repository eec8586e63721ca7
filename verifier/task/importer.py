"""`verifier task import SRC DEST`: an existing Harbor task, graded by this image.

SRC is a Harbor task dir (verifier.task.harbor_task), or a dir of them (a dataset).
DEST is SRC as it was, plus what a separate verifier graded by this image needs:

    DEST/task.toml                 SRC's, every key kept, with `artifacts` (the agent's work
                                   dir first), `[verifier] environment_mode = "separate"`,
                                   `[verifier.environment]` (the resources the tests had),
                                   `user = "root"`, a network mode, and `[verifier] env`
                                   with the case, a deadline inside `timeout_sec` and
                                   `VERIFIER_REWARD_JSON = "native"` (reward.json: `reward`
                                   and the keys the task's own test.sh wrote, so `reward`
                                   alone for a one-value task: pass@k works)
    DEST/instruction.md, environment/, solution/, ...   as they were
    DEST/tests/task-tests/         SRC's tests/ as it was: the trusted /tests of its script
    DEST/tests/eval.yaml           one judge, `tests/script`: test.sh run unchanged
    DEST/tests/Dockerfile          the image the tests ran in (the agent's environment, or
                                   the task's own verifier image), the installs test.sh did
                                   at test time done once here (tests/test-time-installs.sh,
                                   verifier.task.test_script), then the verifier's layer
                                   with eval.yaml and the task's tests in /grading
    DEST/tests/environment/        that image's build context, as `task init --environment`
    DEST/.verifier-task-init.json  what import wrote (verifier.task.record)

With `--hardened-runner` (verifier.task.hardened_runner: a test.sh whose only grading
step is pytest over files in /tests), eval.yaml runs those tests in the verifier's
hardened runner instead of test.sh, behind the recommended gate:

    DEST/tests/eval.yaml           `guard/no_tamper` (against DEST/tests/workdir.sha256:
                                   the work dir as the environment has it, written when
                                   the image is built) and `tests/all_passed` (runner
                                   pytest, test_dir task-tests/, case_at the work dir, the
                                   trusted list tests.txt), gated; reward.json `{reward}`
    DEST/tests/tests.txt           the tests' ids, read from their sources
    DEST/tests/workdir.sha256      a stand-in for the local `verifier check`

Without it, a task that could take it gets `suggestion` (the command says so).

Importing again over DEST rewrites what import wrote and keeps every file its author
changed since, naming each (as `task init --force`).
"""

from __future__ import annotations

import copy
import math
import re
import shlex
import tomllib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

import attrs
import yaml

from verifier.console import warn_all
from verifier.defaults import DEFAULT_IMAGE, DEFAULT_VERIFIER_NETWORK
from verifier.errors import UsageError, VerifierError
from verifier.task.dockerfile import final_entrypoint
from verifier.task.environment import (
    CONTEXT_IN_TESTS,
    DOCKERIGNORE,
    context_copy,
    verifier_dockerfile,
)
from verifier.task.harbor_task import (
    TASK_TOML,
    TEST_SCRIPT,
    TESTS_DIR,
    HarborTask,
    read_harbor_task,
)
from verifier.task.hardened_runner import HardenedPlan, plan_hardened
from verifier.task.manifest import MANIFEST, manifest_text
from verifier.task.package import check_arguments, check_dest, safe_name
from verifier.task.record import PackageWriter, describe_kept
from verifier.task.settings import GRADE_SLACK_S, HARBOR_SLACK_S
from verifier.task.test_script import ScriptPlan, plan_script
from verifier.task.tests_dir import copyable_files
from verifier.task.toml_write import dumps
from verifier.task.workdir_toolchain import refuse_toolchain_in_workdir

TASK_TESTS = "task-tests"  # tests/task-tests/: the task's own tests/, its script's /tests
CONFIG_DIR = "/grading"  # eval.yaml and task-tests/ in the verifier's image
IMAGE_ENV = f"{CONFIG_DIR}/image.env"  # the environment's ENV, as its builds saw it
SETUID_LIST = f"{CONFIG_DIR}/setuid.list"  # the image's setuid-root programs
INSTALLS = "test-time-installs.sh"  # tests/: what test.sh installs, run at build time
JUDGE = "tests"
TESTS_LIST = "tests.txt"  # --hardened-runner: the trusted list, beside eval.yaml
WORKDIR_MANIFEST = "workdir.sha256"  # --hardened-runner: the environment's work dir
GUARD = "no_tamper"
DEFAULT_TIMEOUT_S = 600.0  # Harbor's [verifier] timeout_sec
_NETWORKS = ("auto", "no-network", "public")
# Resources of [environment] the tests had in shared mode: the verifier's container
# gets the same ([verifier.environment], the same schema).
_RESOURCES = ("cpus", "memory_mb", "storage_mb", "gpus", "gpu_types", "tpu", "env")
# Kept root's: the kernel's file systems, and the image's password hashes.
_UNTOUCHED = " -o ".join(
    f"-path {path}" for path in ("/proc", "/sys", "/dev", "/etc/shadow", "/etc/gshadow")
)
# What a build's `env` shows that is the builder's, not the image's.
_BUILD_ONLY = "HOSTNAME|HOME|PWD|OLDPWD|SHLVL|_"


@attrs.frozen
class ImportOptions:
    image: str = DEFAULT_IMAGE  # the verifier image the package's Dockerfile copies from
    verifier_network: str = DEFAULT_VERIFIER_NETWORK  # auto | no-network | public
    force: bool = False  # write into a non-empty DEST (keeping what its author changed)
    hardened_runner: bool = False  # the hardened runner instead of test.sh, where it can


@attrs.frozen
class Imported:
    dest: Path
    name: str
    notes: tuple[str, ...]  # what grades, but may need the author's eye
    suggestion: str | None = None  # what `--hardened-runner` would do, when it can


@attrs.frozen
class Times:
    """How the task's own [verifier] timeout_sec is shared out."""

    timeout_s: float  # Harbor's, as the task has it
    deadline_s: float  # VERIFIER_DEADLINE: the reward is written before it
    judge_s: float  # the judge's timeout
    script_s: float  # test.sh's own


def import_times(timeout_s: float) -> Times:
    """Inside the task's timeout: Harbor's exec (HARBOR_SLACK_S), the grade's own work
    (GRADE_SLACK_S) and the copies the script's sandbox makes (a tenth of the judge's
    time, at most 10 s), each at most a quarter of what is left for a short timeout."""
    deadline = math.floor(max(timeout_s - HARBOR_SLACK_S, timeout_s * 0.75))
    judge = math.floor(max(deadline - GRADE_SLACK_S, deadline * 0.75))
    script = math.floor(judge - min(10.0, judge * 0.1))
    return Times(float(timeout_s), float(deadline), float(judge), float(script))


def import_task(source: Path, dest: Path, options: ImportOptions = ImportOptions()) -> Imported:
    """Write the package for the Harbor task at `source` into `dest` (module docstring).
    UsageError when the task cannot be imported, `dest` is not empty (without
    `force`), or test.sh fetches something at test time that import cannot do at build
    time and the verifier would have no network."""
    source, dest = Path(source), Path(dest)
    if options.verifier_network not in _NETWORKS:
        raise UsageError(
            f"--verifier-network {options.verifier_network!r}: use {', '.join(_NETWORKS)}"
        )
    if dest.resolve() == source.resolve() or source.resolve().is_relative_to(dest.resolve()):
        raise UsageError(f"{dest}: the package must not hold {source}: give another DEST")
    task = read_harbor_task(source)
    check_arguments(task.workdir, options.image, None)  # a work dir the package can use
    refuse_toolchain_in_workdir(
        task.toolchain.environment, task.workdir, f"{task.root}: {task.toolchain.label}"
    )
    tests = task.root / TESTS_DIR
    others = [path for _, path in copyable_files(tests, []) if path != task.script]
    plan = plan_script(task.script, others)
    network = _network(task, plan, options.verifier_network)
    times = import_times(_timeout(task))
    found = plan_hardened(task.script, tests, plan, task.workdir)
    if options.hardened_runner and isinstance(found, str):
        raise UsageError(f"--hardened-runner: {found}: import without it (test.sh as the judge)")
    hardened = found if options.hardened_runner and not isinstance(found, str) else None
    suggestion = (
        None
        if options.hardened_runner or isinstance(found, str)
        else f"tests/test.sh only runs pytest over {len(found.ids)} tests in /tests: import "
        "with --hardened-runner to run them in the verifier's hardened runner instead, "
        "hidden from the code under test, behind the recommended gate (docs/harbor.md)"
    )
    notes = list(task.notes)
    if plan.fetches and network == "public":
        notes += [
            f"{task.script}:{line.number}: fetches at test time ({line.text[:60]}): the "
            "verifier keeps the network for it"
            for line in plan.fetches
        ]
    notes += [
        f"{task.script}:{line.number}: `{line.text[:60]}` needs root, and the script runs "
        "as the task's [verifier] user, not root: that line fails at test time"
        for line in plan.as_root
        if hardened is None and not script_as_root(task)
    ]
    check_dest(dest, options.force)
    writer = PackageWriter(dest)
    for relative, path in copyable_files(source, [], skipped={dest.resolve()}):
        if relative == PurePosixPath(TASK_TOML):
            continue
        if relative.parts[0] == TESTS_DIR:
            writer.copy(
                f"{TESTS_DIR}/{TASK_TESTS}/{relative.relative_to(TESTS_DIR)}", path, _x(path)
            )
        else:
            writer.copy(relative, path, _x(path))
    environment = task.toolchain.environment
    for file in context_copy(environment):
        if task.toolchain.docker_image is None:
            writer.copy(f"{TESTS_DIR}/{file.relative}", file.source, _x(file.source))
    if environment.ignore.patterns:
        writer.write_text(
            f"{TESTS_DIR}/{DOCKERIGNORE}", environment.ignore.relocated(CONTEXT_IN_TESTS)
        )
    if plan.build_time:
        writer.write_text(f"{TESTS_DIR}/{INSTALLS}", _installs_script(task, plan), True)
    if hardened is None:
        writer.write_text(f"{TESTS_DIR}/eval.yaml", eval_yaml(task, plan, times, network))
    else:
        writer.write_text(f"{TESTS_DIR}/eval.yaml", hardened_eval_yaml(task, hardened, times))
        writer.write_text(f"{TESTS_DIR}/{TESTS_LIST}", "".join(f"{i}\n" for i in hardened.ids))
        writer.write_text(f"{TESTS_DIR}/{WORKDIR_MANIFEST}", _MANIFEST_STAND_IN)
    writer.write_text(f"{TESTS_DIR}/Dockerfile", _dockerfile(task, plan, options.image, hardened))
    config = separate_config(task, times, network, "native" if hardened is None else "reward")
    writer.write_text(TASK_TOML, _task_toml_header(task) + dumps(config))
    kept = writer.finish()
    warn_all(environment.warnings)
    warn_all(describe_kept(dest, kept))
    return Imported(dest, task.name, tuple(notes), suggestion)


def _x(path: Path) -> bool:
    return bool(path.stat().st_mode & 0o111)


def _timeout(task: HarborTask) -> float:
    value = task.config.get("verifier", {}).get("timeout_sec", DEFAULT_TIMEOUT_S)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise UsageError(
            f"{task.root / TASK_TOML}: [verifier] timeout_sec {value!r}: must be a positive number"
        )
    return float(value)


def _network(task: HarborTask, plan: ScriptPlan, asked: str) -> str:
    """The verifier's network: asked for, else the task's own [verifier] network_mode,
    else none; UsageError when test.sh still fetches at test time without one."""
    own = task.config.get("verifier", {}).get("network_mode")
    mode = asked if asked != "auto" else own if isinstance(own, str) else "no-network"
    if mode != "public" and plan.fetches:
        first = plan.fetches[0]
        raise UsageError(
            f"{task.script}:{first.number}: `{first.text[:80]}` fetches at test time, which "
            "import cannot do when the image is built: install it in the environment's "
            "Dockerfile, or keep the verifier's network (--verifier-network public)"
        )
    return mode


def separate_config(
    task: HarborTask, times: Times, network: str, reward_keys: str = "native"
) -> dict[str, Any]:
    """task.toml's data: every key of the task's, and what separate mode needs (the
    reward's keys: `native`, those test.sh wrote; `reward` alone for the hardened
    runner, whose judge is no script)."""
    config = copy.deepcopy(task.config)
    artifacts = [entry for entry in config.get("artifacts") or [] if _source(entry) != task.workdir]
    config["artifacts"] = [task.workdir, *artifacts]
    verifier = config.setdefault("verifier", {})
    verifier["timeout_sec"] = times.timeout_s
    verifier["env"] = {
        **verifier.get("env", {}),
        "VERIFIER_CASE": task.workdir,
        "VERIFIER_DEADLINE": _seconds(times.deadline_s),
        "VERIFIER_REWARD_JSON": reward_keys,
    }
    verifier["environment_mode"] = "separate"
    verifier["user"] = "root"  # the grader; the script runs in its sandbox (eval.yaml)
    verifier["network_mode"] = network
    if network != "allowlist":
        verifier.pop("allowed_hosts", None)
    own = verifier.get("environment") if isinstance(verifier.get("environment"), dict) else {}
    agent_environment = config.get("environment", {})
    resources = {key: agent_environment[key] for key in _RESOURCES if key in agent_environment}
    environment = {**({} if task.separate else resources), **own}
    environment.pop("docker_image", None)  # tests/Dockerfile is the verifier's image now
    environment.setdefault("build_timeout_sec", agent_environment.get("build_timeout_sec", 600.0))
    verifier["environment"] = environment
    metadata = config.setdefault("metadata", {})
    metadata.setdefault("verifier", "harbor-verifier")
    return config


def _source(entry: object) -> object:
    return entry.get("source") if isinstance(entry, dict) else entry


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _task_toml_header(task: HarborTask) -> str:
    return (
        f"# {task.name}, imported by `verifier task import` from {task.root.name}/: every key of\n"
        "# its task.toml, and the separate verifier graded by harbor-verifier ([verifier],\n"
        "# [verifier.environment], artifacts). Its tests run unchanged: tests/eval.yaml.\n"
    )


def script_as_root(task: HarborTask) -> bool:
    """Whether Harbor ran the task's test.sh as root: its [verifier] user, else root."""
    user = task.config.get("verifier", {}).get("user")
    return user is None or str(user) in ("root", "0")


def eval_yaml(task: HarborTask, plan: ScriptPlan, times: Times, network: str) -> str:
    """tests/eval.yaml: the task's own test.sh as the one judge, the reward its value."""
    verifier = task.config.get("verifier", {})
    passed = sorted({*verifier.get("env", {}), *task.config.get("environment", {}).get("env", {})})
    arguments: dict[str, Any] = {
        "tests": TASK_TESTS,
        "script": TEST_SCRIPT,
        "case_at": task.workdir,
        "cwd": task.script_cwd,
        "reward_files": list(plan.reward_files),
    }
    if plan.ctrf:
        arguments["ctrf"] = plan.ctrf
    as_root = script_as_root(task)
    if plan.uses_home or as_root:
        arguments["home"] = "/root"
    arguments["image_env"] = IMAGE_ENV
    if passed:
        arguments["pass_env"] = passed
    if plan.uses_uv and network == "no-network":
        arguments["env"] = {"UV_OFFLINE": "1"}
    if as_root:  # as Harbor ran it: root, here of its own user namespace
        arguments["as_root"] = True
        arguments["setuid"] = SETUID_LIST
    entrypoint = final_entrypoint(task.toolchain.environment.dockerfile)
    if entrypoint is not None:  # what it set up in the agent's container, for the tests
        arguments["entrypoint"] = list(entrypoint)
    arguments["timeout"] = times.script_s
    document = {
        "name": task.name,
        "judges": [
            {
                "name": JUDGE,
                "builtin": "tests/script",
                "arguments": arguments,
                "timeout": times.judge_s,
            }
        ],
        "reward": {"judge": JUDGE, "on_error": "fail"},
    }
    header = (
        f"# {task.name}, imported by `verifier task import`: the task's own tests/test.sh\n"
        f"# (here {TASK_TESTS}/{TEST_SCRIPT}), unchanged, is the judge; its reward is the reward.\n"
        '# See docs/harbor.md, "Importing an existing task".\n'
    )
    return header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


_MANIFEST_STAND_IN = (
    "# The work dir as the task's environment has it, before the agent: written in the\n"
    "# verifier's image when it is built (tests/Dockerfile), where guard/no_tamper reads\n"
    "# it. This stand-in (no file: every file is the agent's) is for a local check.\n"
)


def hardened_eval_yaml(task: HarborTask, hardened: HardenedPlan, times: Times) -> str:
    """tests/eval.yaml with --hardened-runner: the task's tests in the verifier's hardened
    runner, behind the recommended gate (docs/builtins.md); the reward is all passed, as
    test.sh wrote it. The judges run one after the other: the guard's time (a fifth of
    the judges', at most 30 s) comes out of the tests'."""
    guard = float(min(30, math.floor(times.judge_s / 5)))
    tests: dict[str, Any] = {
        "runner": "pytest",
        "executable": hardened.executable,
        "test_dir": TASK_TESTS,
        "case_at": task.workdir,
        "tests": TESTS_LIST,
        "timeout": times.script_s - guard,
    }
    document = {
        "name": task.name,
        "judges": [
            {
                "name": GUARD,
                "builtin": "guard/no_tamper",
                "arguments": {"reference": WORKDIR_MANIFEST},
                "timeout": guard,
            },
            {
                "name": JUDGE,
                "builtin": "tests/all_passed",
                "arguments": tests,
                "timeout": times.judge_s - guard,
            },
        ],
        "reward": {"judge": JUDGE, "gate": True, "on_error": "fail"},
    }
    header = (
        f"# {task.name}, imported by `verifier task import --hardened-runner`: the tests its\n"
        f"# test.sh ran with pytest ({TASK_TESTS}/), run by the verifier's hardened runner\n"
        f"# over the trusted list {TESTS_LIST}, hidden from the code under test; the reward is\n"
        "# 1 when every listed test passed (as test.sh wrote it), unless the agent's code\n"
        f'# rewrites the run from inside ({GUARD}). See docs/harbor.md, "Importing an\n'
        '# existing task".\n'
    )
    return header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


def _installs_script(task: HarborTask, plan: ScriptPlan) -> str:
    lines = "\n".join(plan.build_time)
    moved = ", ".join(str(line.number) for line in plan.moved)
    return (
        "#!/bin/bash\n"
        f"# What {task.root.name}/tests/test.sh installs each time it runs (its lines {moved}),\n"
        "# done once when the verifier's image is built, as root with HOME=/root (the\n"
        "# script's HOME starts as a copy of /root). Generated by `verifier task import`:\n"
        "# edit it when a line needs another form at build time.\n"
        "set -eux\n"
        "export DEBIAN_FRONTEND=noninteractive HOME=/root\n"
        "cd /\n"
        f"{lines}\n"
    )


def _dockerfile(
    task: HarborTask, plan: ScriptPlan, image: str, hardened: HardenedPlan | None = None
) -> str:
    before = ["# --- what tests/test.sh installs when it runs, done once here ---", "USER root"]
    if plan.build_time:
        before += [
            f"COPY {INSTALLS} /tmp/verifier-{INSTALLS}",
            f"RUN bash /tmp/verifier-{INSTALLS} && rm -f /tmp/verifier-{INSTALLS}",
        ]
    if hardened is not None:
        before += _hardened_lines(task, hardened)
    before += [
        "# Files of the image only root may read (an answer key, a root-owned config): the",
        "# task's test.sh read them as root, here it runs as the sandbox's user. They are the",
        "# image's own, never the agent's (the case is only what Harbor copies in), so they",
        "# are made readable to it; the verifier's config, added below, stays root's.",
        (
            f"RUN find / -xdev \\( {_UNTOUCHED} \\) -prune -o \\( -type d ! -perm -o=rx -o "
            "-type f ! -perm -o=r \\) -exec chmod o+rX {} +"
        ),
        "# The environment's variables (its ENV), for the task's script: it runs with them;",
        "# and its setuid-root programs, which run as the script's root (the sandbox's).",
        f"RUN mkdir -p {CONFIG_DIR} && env | grep -Ev '^({_build_only(task)})=' > {IMAGE_ENV} \\",
        (
            f"    && find / -xdev \\( {_UNTOUCHED} \\) -prune -o -type f -perm -4000 -user root "
            f"-print > {SETUID_LIST}"
        ),
    ]
    entries = ["eval.yaml", *(f"{TASK_TESTS}/{path}" for path in _task_tests(task))]
    if hardened is not None:
        entries.append(TESTS_LIST)
    return verifier_dockerfile(
        task.toolchain.environment,
        image,
        task.workdir,
        entries,
        config_dir=CONFIG_DIR,
        before_verifier=before,
        source_label=task.toolchain.label,
    )


def _hardened_lines(task: HarborTask, hardened: HardenedPlan) -> list[str]:
    """The hardened runner's python (made here when test.sh ran pytest by uv), checked to
    import pytest, and the manifest of the work dir as the environment has it."""
    lines = []
    if hardened.build:
        lines += [
            "# The hardened runner's python: pytest and what test.sh ran it with (uvx).",
            'RUN export HOME=/root PATH="/root/.local/bin:/root/.cargo/bin:$PATH"; \\',
            *(f"    {line} && \\" for line in hardened.build),
            "    true",
        ]
    python = shlex.quote(hardened.executable)
    workdir = shlex.quote(task.workdir)
    check = (
        f"RUN {python} -c 'import pytest' || {{ echo '--hardened-runner: {python} cannot "
        "import pytest: install it in the environment (or import without the flag)' >&2; "
        "exit 1; }"
    )
    manifest = (
        f"RUN mkdir -p {CONFIG_DIR} && : > {CONFIG_DIR}/{WORKDIR_MANIFEST} && "
        f"if [ -d {workdir} ]; then cd {workdir} && find . -type f ! -name '*\\*' -print0 "
        f"| xargs -0 -r sha256sum > {CONFIG_DIR}/{WORKDIR_MANIFEST}; fi"
    )
    return [
        *lines,
        check,
        "# The work dir as the environment has it, before the agent: guard/no_tamper reads",
        "# only the files the agent added or changed.",
        manifest,
    ]


def _build_only(task: HarborTask) -> str:
    """The names a build's `env` shows that a container of the image does not have: the
    builder's own, and the Dockerfile's ARGs (build arguments, not ENV)."""
    arguments = [
        instruction.arguments.split("=", 1)[0].strip()
        for instruction in task.toolchain.environment.dockerfile.instructions
        if instruction.keyword == "ARG"
    ]
    names = [name for name in arguments if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)]
    return "|".join([_BUILD_ONLY, *sorted(set(names))])


def _task_tests(task: HarborTask) -> list[str]:
    return [relative.as_posix() for relative, _ in copyable_files(task.root / TESTS_DIR, [])]


# --- a dataset: many tasks ----------------------------------------------------------------


@attrs.frozen
class Outcome:
    source: Path
    imported: Imported | None
    problem: str | None  # why it was not imported


def import_many(
    source: Path, dest: Path, options: ImportOptions = ImportOptions()
) -> list[Outcome]:
    """Every task dir under `source` (a subdir with task.toml) into DEST/<its name>; a
    task that cannot be imported is an Outcome with its problem, the others go on.
    DEST/dataset.toml when `source` has one."""
    source, dest = Path(source), Path(dest)
    tasks = sorted(path for path in source.iterdir() if (path / TASK_TOML).is_file())
    if not tasks:
        raise UsageError(f"{source}: no task.toml, and no subdir with one: not a task or dataset")
    check_dest(dest, options.force)
    outcomes = []
    for task in tasks:
        try:
            imported = import_task(
                task, dest / safe_name(task.name), attrs.evolve(options, force=True)
            )
        except VerifierError as problem:
            outcomes.append(Outcome(task, None, problem.message))
        else:
            outcomes.append(Outcome(task, imported, None))
    if (source / MANIFEST).is_file():
        _write_manifest(source, dest)
    return outcomes


def _write_manifest(source: Path, dest: Path) -> None:
    try:
        with (source / MANIFEST).open("rb") as handle:
            dataset = tomllib.load(handle).get("dataset", {})
    except (OSError, ValueError):
        dataset = {}
    name = (
        dataset.get("name")
        if isinstance(dataset.get("name"), str)
        else f"local/{safe_name(source.name)}"
    )
    description = str(dataset.get("description", f"{source.name}, imported"))
    writer = PackageWriter(dest)
    writer.write_text(
        MANIFEST,
        manifest_text(
            dest, name, description, generated_by=f"`verifier task import` from {source}"
        ),
    )
    warn_all(describe_kept(dest, writer.finish()))


def summary_lines(outcomes: Iterable[Outcome]) -> list[str]:
    """What a dataset import says: each task imported cleanly, with notes, or not."""
    outcomes = list(outcomes)
    clean = [o for o in outcomes if o.imported is not None and not o.imported.notes]
    noted = [o for o in outcomes if o.imported is not None and o.imported.notes]
    failed = [o for o in outcomes if o.imported is None]
    lines = [
        (
            f"imported {len(clean) + len(noted)} of {len(outcomes)} tasks: {len(clean)} "
            f"cleanly, {len(noted)} with notes; {len(failed)} need the author"
        )
    ]
    lines += [f"  ok     {o.source.name}" for o in clean]
    for outcome in noted:
        assert outcome.imported is not None
        lines.append(f"  notes  {outcome.source.name}:")
        lines += [f"           {note}" for note in outcome.imported.notes]
    lines += [f"  FAILED {o.source.name}: {o.problem}" for o in failed]
    return lines
