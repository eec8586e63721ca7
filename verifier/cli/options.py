"""Every command's flags, VERIFIER_* variables, defaults and exit codes, declared once.

The parser (verifier.cli.parser), every help (verifier.cli.help) and docs/cli.md are
made from OPTIONS and COMMANDS, and each command's values come from read_values, so a
setting has one flag, one environment variable, one parser and one default whichever
command reads it. A flag given on the command line wins over its variable, which wins
over the default; a bad value in either is a UsageError (exit 2) naming the flag or the
variable. Each command receives its values as its own record (verifier.commands), whose
fields are the command's options: a test holds the two equal.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from verifier.defaults import (
    DEFAULT_IMAGE,
    DEFAULT_LLM_CACHE_MB,
    DEFAULT_LLM_CONCURRENCY,
    DEFAULT_LLM_PARALLEL,
    DEFAULT_MEMORY_MB,
    DEFAULT_VERIFIER_NETWORK,
    DEFAULT_WORKDIR,
)
from verifier.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_BUDGET,
    EXIT_CASE,
    EXIT_CONFIG,
    EXIT_DISAGREES,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_JUDGE_ERROR,
    EXIT_MEANINGS,
    EXIT_NO_PROCESSES,
    EXIT_NOT_WRITTEN_BACK,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_SANDBOX,
    EXIT_STALE_REWARD,
    EXIT_TASK_TEST,
    EXIT_TERMINATED,
    UsageError,
)
from verifier.parsers import (
    ALL_REWARD_KEYS,
    VERIFIER_NETWORKS,
    parse_agreement,
    parse_bool,
    parse_budget_id,
    parse_choice,
    parse_fraction,
    parse_globs,
    parse_memory_mb,
    parse_name,
    parse_names,
    parse_path,
    parse_positive_int,
    parse_positive_number,
    parse_reward_keys,
    parse_seconds,
    parse_shard,
    parse_text,
)

DEFAULT_CONFIG = Path("/tests/eval.yaml")
DEFAULT_CASE = Path("/case")
DEFAULT_OUT = Path("/logs/verifier")
DEFAULT_AGENT_LOGS = Path("/logs/agent")  # Harbor's agent logs dir
DEFAULT_SHARDS = 4  # task kube's Indexed Job
DEFAULT_EXPECT = 1.0  # task test: the reward the solution must get


@attrs.frozen
class Option:
    """One setting: its field in the records of the commands that take it, its flags,
    variable, parser and default (the one place it is stated)."""

    name: str
    flags: tuple[str, ...]
    help: str
    parse: Callable[[str], Any] = parse_text
    env: str | None = None
    default: Any = None
    default_text: str | None = None  # how a computed or absent default reads in help
    is_flag: bool = False
    metavar: str | None = None

    def default_label(self) -> str:
        """`$VERIFIER_OUT, else /logs/verifier`: where the value comes from when not given."""
        shown = self.default_text
        if shown is None and not self.is_flag and self.default is not None:
            shown = str(self.default)
        return ", else ".join(part for part in (f"${self.env}" if self.env else "", shown) if part)


OPTIONS: dict[str, Option] = {
    option.name: option
    for option in (
        Option(
            "config",
            ("--config",),
            "the eval.yaml",
            parse_path,
            "VERIFIER_CONFIG",
            DEFAULT_CONFIG,
            metavar="FILE",
        ),
        Option(
            "case",
            ("--case",),
            "the agent's work dir (read only, never imported)",
            parse_path,
            "VERIFIER_CASE",
            DEFAULT_CASE,
            metavar="DIR",
        ),
        Option(
            "out",
            ("--out",),
            "where the reward files go",
            parse_path,
            "VERIFIER_OUT",
            DEFAULT_OUT,
            metavar="DIR",
        ),
        Option(
            "case_id",
            ("--case-id",),
            "the case's entry in eval.yaml's dataset: its annotations and input",
            parse_name,
            "VERIFIER_CASE_ID",
            default_text="the case dir's name",
            metavar="ID",
        ),
        Option(
            "step",
            ("--step",),
            "grade only this execution step's judges (a multi-step task's verifier)",
            parse_name,
            "VERIFIER_STEP",
            metavar="STEP",
        ),
        Option(
            "agent_logs",
            ("--agent-logs",),
            "Harbor's agent logs dir: its trajectory.json (ATIF), when there, is the "
            "agent's conversation",
            parse_path,
            "VERIFIER_AGENT_LOGS",
            DEFAULT_AGENT_LOGS,
            metavar="DIR",
        ),
        Option(
            "cases",
            ("--cases",),
            "a dir of case dirs, or a Harbor job dir (its trials)",
            parse_path,
            metavar="DIR",
        ),
        Option(
            "jobs",
            ("--jobs", "-j"),
            "worker processes",
            parse_positive_int,
            default_text="the CPU count",
            metavar="N",
        ),
        Option(
            "shard",
            ("--shard",),
            "grade only shard I of N (by a hash of the case name)",
            parse_shard,
            metavar="I/N",
        ),
        Option(
            "force",
            ("--force",),
            "re-grade cases already graded with this config",
            is_flag=True,
            default=False,
        ),
        Option(
            "memory_mb",
            ("--memory-mb",),
            "memory limit of each judge process, in MiB",
            parse_memory_mb,
            "VERIFIER_JUDGE_MEMORY_MB",
            DEFAULT_MEMORY_MB,
            metavar="N",
        ),
        Option(
            "llm_parallel",
            ("--llm-parallel",),
            "LLM judges of one case run at once",
            parse_positive_int,
            "VERIFIER_LLM_PARALLEL",
            DEFAULT_LLM_PARALLEL,
            metavar="N",
        ),
        Option(
            "no_llm",
            ("--no-llm",),
            "skip LLM judges (skipped records), for dry runs",
            parse_bool,
            "VERIFIER_NO_LLM",
            False,
            is_flag=True,
        ),
        Option(
            "llm_concurrency",
            ("--llm-concurrency",),
            "the most LLM requests in flight per endpoint, shared by every case: a "
            "ceiling, under which the batch finds the endpoint's pace",
            parse_positive_int,
            "VERIFIER_LLM_CONCURRENCY",
            DEFAULT_LLM_CONCURRENCY,
            metavar="N",
        ),
        Option(
            "llm_cache",
            ("--llm-cache",),
            "keep model answers in DIR and reuse them",
            parse_path,
            "VERIFIER_LLM_CACHE",
            metavar="DIR",
        ),
        Option(
            "no_llm_cache",
            ("--no-llm-cache",),
            "neither read nor write the answer cache",
            parse_bool,
            "VERIFIER_NO_LLM_CACHE",
            False,
            is_flag=True,
        ),
        Option(
            "llm_cache_mb",
            ("--llm-cache-mb",),
            "size bound of the answer cache, in MiB",
            parse_positive_int,
            "VERIFIER_LLM_CACHE_MB",
            DEFAULT_LLM_CACHE_MB,
            metavar="N",
        ),
        Option(
            "max_cost_usd",
            ("--max-cost-usd",),
            "the LLM judges' budget (USD, by the price table): a case's requests are "
            "reserved at their most before they go, and a case that does not fit is not "
            "graded",
            parse_positive_number,
            "VERIFIER_MAX_COST_USD",
            metavar="USD",
        ),
        Option(
            "budget_id",
            ("--budget-id",),
            "with --max-cost-usd: batches over one --out naming the same ID spend that "
            "budget together (shards share `default` when not given)",
            parse_budget_id,
            "VERIFIER_BUDGET_ID",
            metavar="ID",
        ),
        Option(
            "calibrate",
            ("--calibrate",),
            "report each labelled judge's agreement with human labels (Spearman for "
            "scores, Cohen's kappa for pass/fail)",
            is_flag=True,
            default=False,
        ),
        Option(
            "labels",
            ("--labels",),
            "the human labels, {case: {judge: label}} (YAML/JSON); else the dataset's "
            "`labels` annotation",
            parse_path,
            metavar="FILE",
        ),
        Option(
            "min_agreement",
            ("--min-agreement",),
            "with --calibrate: fail the run (exit 7) when a labelled judge agrees less",
            parse_agreement,
            metavar="X",
        ),
        Option(
            "keep_errors",
            ("--keep-errors",),
            "do not re-grade cases graded with this config whose judges errored",
            is_flag=True,
            default=False,
        ),
        Option(
            "reward_keys",
            ("--reward-keys",),
            "what reward.json holds: `reward` alone (Harbor's pass@k needs it), `all` "
            "(the reward and every judge with a value), `native` (the reward and the keys "
            "the task's own test.sh wrote, via its tests/script judge), or `NAME,...` (the "
            "reward and these judges, always present); judges.json has every judge either way",
            # Not VERIFIER_REWARD_KEYS: Harbor scrubs the value of every [verifier] env
            # name with KEY in it from every file of the trial, reward.json included.
            parse_reward_keys,
            "VERIFIER_REWARD_JSON",
            ALL_REWARD_KEYS,
            default_text="all",
            metavar="reward|all|native|NAME,...",
        ),
        Option(
            "deadline",
            ("--deadline",),
            "seconds the whole grade may take from the process's start: judges still running "
            "when it nears are stopped as timeouts and the reward is written before it (a "
            "batch: each case's, from its start)",
            parse_seconds,
            "VERIFIER_DEADLINE",
            default_text="none",
            metavar="S",
        ),
        Option(
            "termination_log",
            ("--termination-log",),
            "also write the summary line here (/dev/termination-log in Kubernetes)",
            parse_path,
            "VERIFIER_TERMINATION_LOG",
            metavar="FILE",
        ),
        Option(
            "write_back",
            ("--write-back",),
            "with a Harbor job dir as --cases: write each trial's new reward into the "
            "trial (its verifier/ dir and result.json), as Harbor's regrade records one; "
            "single-step trials only (exit 12 when a trial is not written back)",
            is_flag=True,
            default=False,
        ),
        Option(
            "weak_sandbox",
            ("--weak-sandbox",),
            "run code from the case even where the sandbox cannot hide the grader's files "
            'from it (no Landlock: docs/security.md, "Without a strong sandbox")',
            parse_bool,
            "VERIFIER_WEAK_SANDBOX",
            False,
            is_flag=True,
        ),
        Option(
            "hardened_runner",
            ("--hardened-runner",),
            "where test.sh only runs pytest over /tests files: run them in the verifier's "
            "hardened runner instead (hidden from the code under test, a trusted tests: list, "
            "the recommended gate); else stop, saying why",
            is_flag=True,
            default=False,
        ),
        Option("debug", ("--debug",), "show tracebacks", is_flag=True, default=False),
        Option(
            "strict",
            ("--strict",),
            "treat warnings as errors (exit 2)",
            is_flag=True,
            default=False,
        ),
        Option("dest", (), "the task package dir to create", parse_path, metavar="DEST"),
        Option(
            "source",
            (),
            "the Harbor task dir to import (task.toml, tests/test.sh, ...), or a dir of them",
            parse_path,
            metavar="SRC",
        ),
        Option(
            "image",
            ("--image",),
            "the verifier image tests/Dockerfile builds FROM (or copies /opt/verifier from)",
            env="VERIFIER_IMAGE",
            default=DEFAULT_IMAGE,
            metavar="IMAGE",
        ),
        Option(
            "agent_image",
            ("--agent-image",),
            "the agent's image ([environment].docker_image); else environment/Dockerfile",
            metavar="IMAGE",
        ),
        Option(
            "name",
            ("--name",),
            "the task's org/name",
            default_text="local/<DEST name>",
            metavar="ORG/NAME",
        ),
        Option(
            "workdir",
            ("--workdir",),
            "the agent's work dir: artifacts and VERIFIER_CASE",
            default=DEFAULT_WORKDIR,
            metavar="DIR",
        ),
        Option(
            "instruction",
            ("--instruction",),
            "a file to use as instruction.md",
            parse_path,
            metavar="FILE",
        ),
        Option(
            "task_input",
            ("--input",),
            "a YAML file: the task's input, baked into tests/input.yaml (trusted); "
            "default: the instruction as its prompt",
            parse_path,
            metavar="FILE",
        ),
        Option(
            "from_dataset",
            ("--from-dataset",),
            "one task per case of eval.yaml's dataset, in DEST/<case-id>/, and DEST/dataset.toml",
            is_flag=True,
            default=False,
        ),
        Option(
            "case_ids",
            ("--cases",),
            "with --from-dataset: only these cases",
            parse_names,
            default_text="every case",
            metavar="ID,...",
        ),
        Option(
            "protect",
            ("--protect",),
            "copy the agent's files these globs match (those the environment's "
            "Dockerfile copies into the work dir) into tests/protected/: the trusted "
            "copies guard/files_unchanged compares the case with",
            parse_globs,
            metavar="GLOB,...",
        ),
        Option(
            "environment",
            ("--environment",),
            "the task's environment (a Dockerfile and its build context): the agent's "
            "image, and the verifier's with the verifier on top",
            parse_path,
            default_text="a placeholder environment/Dockerfile",
            metavar="DIR",
        ),
        Option(
            "verifier_network",
            ("--verifier-network",),
            "the verifier's network: auto (no-network, or the LLM endpoint's host), "
            "no-network or public",
            parse_choice(*VERIFIER_NETWORKS),
            default=DEFAULT_VERIFIER_NETWORK,
            metavar="MODE",
        ),
        Option(
            "min_reward",
            ("--min-reward",),
            "multi-step: a step whose reward is below it stops the trial (eval.yaml's "
            "execution.steps[].min_reward first)",
            parse_fraction,
            metavar="R",
        ),
        Option(
            "engine",
            ("--engine",),
            "the container engine: podman or docker",
            parse_choice("podman", "docker"),
            env="VERIFIER_ENGINE",
            default_text="podman when installed, else docker",
            metavar="ENGINE",
        ),
        Option(
            "expect",
            ("--expect",),
            "the reward the solution must get, to the 4 significant digits shown (2/3 is 0.6667)",
            parse_fraction,
            default=DEFAULT_EXPECT,
            metavar="R",
        ),
        Option(
            "build_network",
            ("--build-network",),
            "the network of the image builds and of the solution's run (e.g. host)",
            parse_text,
            default_text="the engine's default",
            metavar="MODE",
        ),
        Option(
            "package", (), "the task package (made by task init)", parse_path, metavar="PACKAGE"
        ),
        Option(
            "task_image",
            ("--image",),
            "the task's verifier image as the cluster pulls it: PACKAGE/tests built and "
            "pushed (registry/name:tag or @sha256:...)",
            metavar="IMAGE",
        ),
        Option(
            "shards",
            ("--shards",),
            "the Indexed Job's shard count: its completions, one pod each",
            parse_positive_int,
            default=DEFAULT_SHARDS,
            metavar="N",
        ),
    )
}


@attrs.frozen
class Command:
    """A command's options, in the order its help lists them, and its exit codes."""

    name: str
    help: str
    options: tuple[str, ...]
    positional: tuple[str, ...] = ()  # options given as arguments here (check's config)
    required: tuple[str, ...] = ()
    help_overrides: Mapping[str, str] = MappingProxyType({})
    exit_codes: tuple[int, ...] = (EXIT_OK, EXIT_CONFIG, EXIT_BROKEN_PIPE, EXIT_INTERNAL)
    exit_meanings: Mapping[int, str] = MappingProxyType({})  # beyond errors.EXIT_MEANINGS

    def help_of(self, option: Option) -> str:
        return self.help_overrides.get(option.name, option.help)

    def meaning_of(self, code: int) -> str:
        return self.exit_meanings.get(code, EXIT_MEANINGS[code])

    def source_of(self, option: Option) -> str:
        """Where the option's value comes from when the flag is not given."""
        if option.name in self.required:
            return f"required, or ${option.env}" if option.env else "required"
        return option.default_label()


COMMANDS: dict[str, Command] = {
    command.name: command
    for command in (
        Command(
            "grade",
            "Grade one case dir and write reward.json, reward.txt, judges.json and "
            "reward-details.json.",
            (
                "config",
                "case",
                "out",
                "case_id",
                "step",
                "agent_logs",
                "reward_keys",
                "deadline",
                "memory_mb",
                "llm_parallel",
                "no_llm",
                "llm_cache",
                "no_llm_cache",
                "llm_cache_mb",
                "termination_log",
                "weak_sandbox",
                "debug",
            ),
            help_overrides={
                "llm_cache": "keep model answers in DIR and reuse them (off unless given)"
            },
            exit_codes=(
                EXIT_OK,
                EXIT_CONFIG,
                EXIT_CASE,
                EXIT_OUTPUT,
                EXIT_JUDGE_ERROR,
                EXIT_STALE_REWARD,
                EXIT_SANDBOX,
                EXIT_NO_PROCESSES,
                EXIT_INTERRUPTED,
                EXIT_BROKEN_PIPE,
                EXIT_TERMINATED,
                EXIT_INTERNAL,
            ),
            exit_meanings={
                EXIT_OK: "reward written (0.0 included); no reward file is written "
                "unless the exit code is 0"
            },
        ),
        Command(
            "check",
            "Validate eval.yaml without grading: judges, reward mode, warnings, every problem.",
            ("config", "deadline", "strict", "debug"),
            positional=("config",),
            required=("config",),
            help_overrides={
                "config": "the eval.yaml, or a Harbor task dir (its task.toml's timeouts "
                "and tests/eval.yaml)",
                "deadline": "warn when the judges' timeouts can add up past this --deadline",
            },
            exit_meanings={
                EXIT_OK: "valid (warnings included, unless --strict)",
                EXIT_CONFIG: "invalid, a warning under --strict, or a usage error",
            },
        ),
        Command(
            "schema",
            "Print the JSON Schema of eval.yaml, for editors (yaml-language-server) and CI.",
            ("debug",),
        ),
        Command(
            "batch",
            "Grade every case under --cases in parallel workers; resumable, shardable.",
            (
                "cases",
                "out",
                "config",
                "jobs",
                "shard",
                "force",
                "keep_errors",
                "reward_keys",
                "deadline",
                "write_back",
                "memory_mb",
                "llm_concurrency",
                "no_llm",
                "llm_cache",
                "no_llm_cache",
                "llm_cache_mb",
                "max_cost_usd",
                "budget_id",
                "calibrate",
                "labels",
                "min_agreement",
                "termination_log",
                "weak_sandbox",
                "debug",
            ),
            required=("cases", "out"),
            help_overrides={
                "out": "OUT/<case>/reward.json ..., OUT/.batch/summary.{json,csv}",
                "llm_cache": "keep model answers in DIR and reuse them (default OUT/.llm-cache)",
            },
            exit_codes=(
                EXIT_OK,
                EXIT_CONFIG,
                EXIT_CASE,
                EXIT_OUTPUT,
                EXIT_DISAGREES,
                EXIT_BUDGET,
                EXIT_SANDBOX,
                EXIT_NO_PROCESSES,
                EXIT_NOT_WRITTEN_BACK,
                EXIT_INTERRUPTED,
                EXIT_BROKEN_PIPE,
                EXIT_TERMINATED,
                EXIT_INTERNAL,
            ),
            exit_meanings={
                EXIT_OK: "every case graded (a case that could not be graded is an error row "
                "of the summary)",
                EXIT_CASE: "the --cases dir not found",
                EXIT_OUTPUT: "--out not writable, or another batch holds its lock",
                EXIT_INTERRUPTED: "stopped by SIGINT, after writing the summary of the cases "
                "graded",
                EXIT_TERMINATED: "stopped by SIGTERM, after writing the summary of the cases "
                "graded",
            },
        ),
        Command(
            "task init",
            "Render a Harbor task package whose separate verifier is this image.",
            (
                "dest",
                "config",
                "image",
                "agent_image",
                "environment",
                "name",
                "workdir",
                "instruction",
                "task_input",
                "from_dataset",
                "case_ids",
                "protect",
                "verifier_network",
                "min_reward",
                "reward_keys",
                "force",
                "debug",
            ),
            positional=("dest",),
            required=("dest", "config"),
            help_overrides={
                "config": "the eval.yaml that grades the task",
                "force": "write into a non-empty DEST (its other files stay)",
                "name": "the task's org/name (with --from-dataset: the org)",
                "reward_keys": "what the package's reward.json holds: its [verifier] env "
                "VERIFIER_REWARD_JSON (reward, all, native, NAME,...)",
            },
        ),
        Command(
            "task import",
            "Turn an existing Harbor task (or a dir of them) into a package graded by this "
            "image in a separate verifier, its own tests/test.sh unchanged as the judge.",
            ("source", "dest", "image", "verifier_network", "force", "hardened_runner", "debug"),
            positional=("source", "dest"),
            required=("source", "dest"),
            help_overrides={
                "dest": "the package dir to create (for a dir of tasks: one subdir each)",
                "force": "write into a non-empty DEST: what import wrote before is rewritten, "
                "files changed since are kept",
                "verifier_network": "the verifier's network: auto (the task's own [verifier] "
                "network_mode, else no-network), no-network or public",
            },
            exit_meanings={
                EXIT_OK: "every task imported (notes on stdout)",
                EXIT_CONFIG: "a usage error, or a task that cannot be imported (the others of "
                "a dir of tasks are written)",
            },
        ),
        Command(
            "task test",
            "Build a task package's images and grade the untouched environment and the "
            "solution: fails unless the solution gets --expect and the untouched one less.",
            ("dest", "engine", "expect", "build_network", "debug"),
            positional=("dest",),
            required=("dest",),
            help_overrides={"dest": "the task package dir (made by task init)"},
            exit_codes=(EXIT_OK, EXIT_CONFIG, EXIT_TASK_TEST, EXIT_BROKEN_PIPE, EXIT_INTERNAL),
            exit_meanings={
                EXIT_OK: "the solution gets --expect and the untouched environment less"
            },
        ),
        Command(
            "task kube",
            "Write Kubernetes manifests that grade a task package's cases with its own "
            "verifier image: a Job (one case) and an Indexed Job (a batch in shards).",
            ("package", "dest", "task_image", "shards", "force", "debug"),
            positional=("package", "dest"),
            required=("package", "dest", "task_image"),
            help_overrides={
                "dest": "where the manifests go (kustomize dirs job/, batch/, common/, network/)",
                "force": "write into a non-empty DEST (files you edited there are kept)",
            },
        ),
    )
}


# The command groups and what each is: "" is `verifier` itself, whose help lists them.
GROUPS = {
    "": "Grade agent case directories against eval.yaml and write Harbor rewards.",
    "task": "Harbor task packages graded by this image.",
}


def read_values(
    command: str, given: Mapping[str, str | bool | None], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Every option of one command, by name, from what its line gave (None: not given):
    the flag, else its variable (when set and not empty), else its default; a switch is
    True when given. Text is parsed here, so a flag and its variable go through one
    parser. UsageError (exit 2) naming the flag or variable for a bad value, or the one
    missing that the command requires."""
    environ = os.environ if environ is None else environ
    spec = COMMANDS[command]
    values: dict[str, Any] = {}
    for name in spec.options:
        option = OPTIONS[name]
        values[name] = option.default
        raw = given.get(name)
        if raw is not None and raw is not False:
            values[name] = True if raw is True else _parse(option, str(raw), _label(option, spec))
        elif option.env is not None and environ.get(option.env, "") != "":
            values[name] = _parse(option, environ[option.env], f"${option.env}")
        elif name in spec.required:
            raise UsageError(f"{command}: missing {_label(option, spec)}")
    return values


def _label(option: Option, command: Command) -> str:
    """How the command's help names the option: its flag, or its argument's metavar."""
    if option.name in command.positional:
        return option.metavar or option.name.upper()
    return option.flags[0]


def _parse(option: Option, text: str, label: str) -> Any:
    try:
        return option.parse(text)
    except ValueError as error:
        raise UsageError(f"{label}: {error}") from None
