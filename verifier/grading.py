"""One case, start to finish: config + case -> judge results -> reward.

This is the data flow of the package in one place; `verifier grade` and every
batch worker call it, so a case grades the same whichever way it is run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from verifier.case import check_case_dir, read_case
from verifier.config import EvalConfig, IncompleteConfig, JudgeConfig, TaskInput, load_config
from verifier.engine import Limits, run_judges
from verifier.errors import (
    ConfigError,
    JudgesErrored,
    MissingModelError,
    SandboxError,
    UsageError,
)
from verifier.judges import KINDS, PreparedJudge, prepare_judges, runs_case_code
from verifier.judges.base import Pool, Record
from verifier.parsers import RewardKeys, RewardKeysKind
from verifier.results import SCRIPT_BUILTIN, Composition, Grading, JudgeResult
from verifier.reward import DefaultReward, RewardMode, compose

if TYPE_CHECKING:
    from verifier.dataset import Dataset
    from verifier.sandbox import Sandbox


@attrs.frozen
class LoadedEval:
    """A validated config with its judges prepared: load once, grade many cases."""

    config: EvalConfig
    judges: tuple[PreparedJudge, ...]


def load_eval(config_path: Path) -> LoadedEval:
    """eval.yaml loaded and its judges prepared; ConfigErrors (exit 2) listing every problem."""
    config = load_config(config_path, KINDS)
    return LoadedEval(config=config, judges=prepare_judges(config))


@attrs.frozen
class EvalCheck:
    """eval.yaml as `verifier check` sees it: every problem, and every warning."""

    config: EvalConfig | None  # None when the file does not load (whatever else it has)
    problems: tuple[ConfigError, ...]
    warnings: tuple[str, ...]
    dataset: Dataset | None = None  # its dataset, to survey, even when the rest does not load


def check_eval(config_path: Path) -> EvalCheck:
    """load_eval away from the grading environment, collecting instead of raising.

    A model that only the grading environment supplies ($EVAL_JUDGE_MODEL) is a
    warning here: a linter in CI or a task author's machine is not where grading runs.
    Every other problem, of every judge, is still reported, in one run: the judges
    that loaded are prepared (their code compiled, their modules imported, their
    templates read) even when other parts of the file did not load; so is a command
    that runs pytest or go test by hand where `runner:` would harden it.
    """
    try:
        config: EvalConfig | None = load_config(config_path, KINDS)
        problems: tuple[ConfigError, ...] = ()
        partial = config
    except ConfigError as error:
        config, problems = None, _listed(error)
        partial = error.partial if isinstance(error, IncompleteConfig) else None
    if partial is None:
        return EvalCheck(None, problems, ())
    try:
        prepare_judges(partial)
    except ConfigError as error:
        problems += _listed(error)
    missing = tuple(problem for problem in problems if isinstance(problem, MissingModelError))
    from verifier.judges.builtins import hand_run_warnings  # the builtins: only when checking

    return EvalCheck(
        config=config,
        problems=tuple(problem for problem in problems if problem not in missing),
        warnings=(
            *partial.warnings,
            *(problem.warning() for problem in missing),
            *hand_run_warnings(partial),
        ),
        dataset=partial.dataset,
    )


def _listed(error: ConfigError) -> tuple[ConfigError, ...]:
    return tuple(getattr(error, "problems", (error,)))


def with_llm_cache(
    loaded: LoadedEval, directory: Path, max_mb: int, case_dir: Path | None = None
) -> LoadedEval:
    """loaded with its LLM judges keeping their answers in directory (`grade --llm-cache`);
    UsageError when it lies inside case_dir."""
    if case_dir is not None:
        refuse_cache_inside_case(directory, case_dir)
    if all(judge.pool is not Pool.LLM for judge in loaded.judges):
        return loaded
    from verifier.judges.llm.cache import ResponseCache  # jinja2: only for configs that use it
    from verifier.judges.llm.judge import LLMJudge

    cache = ResponseCache.create(directory, max_mb)
    judges = tuple(
        attrs.evolve(judge, call=attrs.evolve(judge.call, cache=cache))
        if isinstance(judge.call, LLMJudge)
        else judge
        for judge in loaded.judges
    )
    return attrs.evolve(loaded, judges=judges)


@contextlib.contextmanager
def command_sandbox(
    loaded: LoadedEval,
    hidden: Iterable[Path | None],
    *,
    case_dirs: Iterable[Path] = (),
    accept_weak: bool = False,
    slots: int = 1,
    lanes: int = 1,
) -> Iterator[Sandbox | None]:
    """The sandbox of a grade or batch, for the block (see verifier.sandbox): commands
    from the case cannot read eval.yaml's dir nor `hidden` (the out dir, the agent logs,
    the answer cache; a batch's cases and out dirs), nor, where Landlock can hide it,
    the original of `case_dirs` (their private copies are all a command sees of them).
    `slots`: cases graded side by side; `lanes`: judges of a case run side by side. None
    when no judge runs code from the case (planning costs a fork and a few listings,
    which such grades need not pay).

    SandboxError (exit 10) when judges run code from the case and nothing here can keep
    those out of its reach, unless `accept_weak`, or when no scratch dir can be made;
    UsageError when $VERIFIER_SANDBOX_UID leaves no UID for a slot."""
    from verifier.sandbox import Sandbox, discard_policy, plan_policy

    config = loaded.config.path
    paths = [config.parent, config.resolve().parent, *(path for path in hidden if path)]
    running = [judge.config.name for judge in loaded.judges if runs_case_code(judge.config)]
    if running and any(os.path.realpath(path) == "/" for path in paths):
        raise UsageError(
            f"{config}: judge {running[0]} runs code from the case, which cannot read "
            "eval.yaml's dir nor the out dir; one of them is /, which would hide every "
            "file from it: keep eval.yaml and --out in dirs of their own"
        )
    if not running:
        yield None
        return
    from verifier.judges.builtins.pyc_store import configured_store

    store = configured_store()  # the byte code store, where the user keeps it: hidden too
    paths += [store] if store is not None else []
    try:
        policy = plan_policy(
            paths, case_dirs=case_dirs, accept_weak=accept_weak, slots=slots, lanes=lanes
        )
    except ValueError as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        raise SandboxError(
            f"{config}: judge {running[0]} runs code from the case, and no scratch dir can be "
            f"made for it: {error.strerror or error}{where}; give the grader a writable temp "
            "dir (TMPDIR, or --tmpfs /tmp in a container)"
        ) from None
    try:
        if policy.refused:
            raise SandboxError(
                f"{config}: judge {running[0]} runs code from the case, and the sandbox would "
                f"be weak here: {policy.weakness}; grade where Landlock is available (Linux "
                "5.13+), or pass --weak-sandbox (VERIFIER_WEAK_SANDBOX=1) to accept it"
            )
        yield Sandbox(policy)
    finally:
        discard_policy(policy)


@attrs.frozen
class CaseSources:
    """What the task author's side says about one case: its annotations, the text of
    its annotation files, its task input, and which dataset entry they came from."""

    annotations: Mapping[str, Any]
    annotation_contents: Mapping[str, Any]
    task_input: TaskInput
    dataset_entry: str | None  # e.g. dataset/task-0010; None: no dataset, or no entry
    warnings: tuple[str, ...]


def case_sources(config: EvalConfig, case_id: str) -> CaseSources:
    """eval.yaml's annotations and task input, with the dataset entry of case_id (when
    eval.yaml has a dataset) over them. ConfigError when the entry cannot be used."""
    if config.dataset is None:
        return CaseSources(config.annotations, {}, config.task_input, None, ())
    if config.dataset.missing:
        warning = config.dataset.missing_warning()
        return CaseSources(config.annotations, {}, config.task_input, None, (warning,))
    entry = config.dataset.case(case_id)
    if entry is None:
        warning = (
            f"case id {case_id!r} has no entry in the dataset {config.dataset.path}/: graded "
            "without its annotations and input (pass --case-id to name the entry)"
        )
        return CaseSources(config.annotations, {}, config.task_input, None, (warning,))
    task_input = config.task_input
    if entry.input_file is not None:
        task_input = TaskInput(entry.task_input, f"{entry.label}/{entry.input_file}", True)
    return CaseSources(
        annotations={**config.annotations, **entry.annotations},
        annotation_contents=entry.contents,
        task_input=task_input,
        dataset_entry=entry.label,
        warnings=(),
    )


@attrs.frozen
class StepPlan:
    """What one grading runs: the judges, and the reward mode that composes them."""

    judges: tuple[PreparedJudge, ...]
    reward: RewardMode


def step_plan(loaded: LoadedEval, step: str | None) -> StepPlan:
    """Every judge and the reward block; or, for one step of a multi-step eval (a Harbor
    task's per-step verifier), that step's judges (the final step: with those scoped to
    no step) and, on the final step only, the reward block; an earlier step's judges
    are composed the default way. UsageError for a step eval.yaml does not define."""
    config = loaded.config
    if step is None:
        return StepPlan(loaded.judges, config.reward)
    ids = config.step_ids
    if step not in ids:
        defined = f"its steps are {', '.join(ids)}" if ids else "it has no execution.steps"
        raise UsageError(f"--step {step!r}: not a step of {config.path} ({defined})")
    names = set(config.step_judges(step))
    judges = tuple(judge for judge in loaded.judges if judge.config.name in names)
    if step == config.final_step:
        return StepPlan(judges, config.reward)
    return StepPlan(judges, DefaultReward(on_error=config.reward.on_error))


@attrs.frozen
class CaseContext:
    """What the output files say about a case besides its judges: where its material
    came from. Small: a batch sends it from the worker that read the case to the parent
    that writes its files."""

    warnings: tuple[str, ...]
    task_input: TaskInput  # its source and trust (the value is not kept)
    case_id: str | None  # the id the dataset was asked for (None: eval.yaml has none)
    dataset_entry: str | None
    step: str | None


@attrs.frozen
class ReadCase:
    record: Record
    context: CaseContext


def grade(
    loaded: LoadedEval,
    case_dir: Path,
    limits: Limits | None = None,
    *,
    case_id: str | None = None,
    step: str | None = None,
    agent_logs: Path | None = None,
    sandbox: Sandbox | None = None,
) -> Grading:
    """Grade one case dir (CaseError when it is missing or unreadable; ConfigError when
    eval.yaml lies inside it or its dataset entry cannot be used; JudgesErrored when a
    judge errored under on_error: fail).

    `case_id` names the case's dataset entry (default: the case dir's name); `step`,
    the execution step whose judges are graded (default: every judge; see step_plan);
    `agent_logs`, Harbor's agent logs dir, whose trajectory.json is the agent's;
    `sandbox`, where judges run code from the case (command_sandbox; default: one
    planned for this grade alone, hiding eval.yaml's dir, the case and the agent logs)."""
    plan = step_plan(loaded, step)
    case = read(loaded, case_dir, case_id=case_id, step=step, agent_logs=agent_logs)
    if sandbox is not None:
        results = run_judges(plan.judges, case.record, limits, sandbox)
    else:
        with command_sandbox(loaded, (agent_logs,), case_dirs=(case_dir,)) as planned:
            results = run_judges(plan.judges, case.record, limits, planned)
    return conclude(loaded, results, case.context)


def read(
    loaded: LoadedEval,
    case_dir: Path,
    *,
    case_id: str | None = None,
    step: str | None = None,
    agent_logs: Path | None = None,
) -> ReadCase:
    """The case's record and context, as grade reads them (a batch runs its judges in
    two stages: CPU judges in a worker, LLM judges in one shared stage)."""
    config = loaded.config
    refuse_config_inside_case(config.path, case_dir)
    resolved = check_case_dir(case_dir)
    case_id = case_id if case_id is not None else Path(os.path.abspath(case_dir)).name
    sources = case_sources(config, case_id)
    case = read_case(
        resolved,
        config.outputs,
        sources.annotations,
        task_input=sources.task_input,
        annotation_contents=sources.annotation_contents,
        agent_logs=agent_logs,
        tool_outputs=config.tool_outputs,
        trajectory_from=config.trajectory,
    )
    context = CaseContext(
        warnings=(*sources.warnings, *case.warnings),
        task_input=attrs.evolve(case.task_input, value=None),
        case_id=case_id if config.dataset is not None else None,
        dataset_entry=sources.dataset_entry,
        step=step,
    )
    return ReadCase(case.record, context)


def conclude(loaded: LoadedEval, results: tuple[JudgeResult, ...], context: CaseContext) -> Grading:
    """The graded case from the results of its step's judges, in the config's order
    (JudgesErrored when a judge errored and the reward block says on_error: fail)."""
    config = loaded.config
    plan = step_plan(loaded, context.step)
    composition = compose(plan.reward, results, config.scales())
    if context.step is not None and not plan.judges:
        composition = Composition(
            reward=0.0,
            mode=plan.reward.mode,
            gate_enabled=False,
            gate_failed=(),
            contributions={},
            warnings=(
                f"no judge grades step {context.step!r}: the step is unjudged, its reward 0.0",
            ),
        )
    if config.reward.on_error == "fail" and composition.errored:
        reasons = "; ".join(
            f"{result.name}: {result.status.value}: {result.error}"
            for result in results
            if result.failed
        )
        raise JudgesErrored(f"reward.on_error is fail and a judge errored, so no reward: {reasons}")
    return Grading(
        config_name=config.name,
        results=results,
        composition=composition,
        case_warnings=context.warnings,
        task_input_source=context.task_input.source,
        task_input_trusted=context.task_input.trusted,
        case_id=context.case_id,
        dataset_entry=context.dataset_entry,
        step=context.step,
        reward_rule=plan.reward.describe(),
    )


def refuse_cache_inside_case(cache: Path, case_dir: Path) -> None:
    """The answer cache holds the model's grades by a key anyone can compute from the
    prompt: one the agent can write, it could fill with passing answers."""
    if os.path.realpath(cache) == os.path.realpath(case_dir) or Path(
        os.path.realpath(cache)
    ).is_relative_to(os.path.realpath(case_dir)):
        raise UsageError(
            f"--llm-cache {cache}: lies inside the case dir {case_dir}, which the agent "
            "controls (it could plant passing answers); keep the cache outside it"
        )


def check_reward_keys(config: EvalConfig, keys: RewardKeys) -> None:
    """`--reward-keys NAME,...` names judges of eval.yaml, and `native` needs exactly one
    `tests/script` judge (whose reward file's keys it writes): UsageError (exit 2)
    otherwise, before any case is graded (a typo would leave a key out of every trial)."""
    judges = [judge.name for judge in config.judges]
    if keys.kind is RewardKeysKind.NATIVE:
        scripts = [judge.name for judge in config.judges if _is_script(judge)]
        if len(scripts) != 1:
            raise UsageError(
                f"--reward-keys native (or $VERIFIER_REWARD_JSON=native): {config.path} has "
                f"{len(scripts)} tests/script judges ({', '.join(scripts) or 'none'}); native "
                "writes the keys of the one task script's reward file: keep exactly one "
                "tests/script judge, or use reward, all or judge names"
            )
        return
    unknown = [name for name in keys.judges if name not in judges]
    if unknown:
        raise UsageError(
            f"--reward-keys (or $VERIFIER_REWARD_JSON): {', '.join(map(repr, unknown))} "
            f"{'is not a judge' if len(unknown) == 1 else 'are not judges'} of {config.path} "
            f"(its judges: {', '.join(judges) or 'none'}); name judges, or use reward or all"
        )


def _is_script(judge: JudgeConfig) -> bool:
    """A `tests/script` judge: the task's own test script, whose reward file it reads."""
    if judge.kind != "builtin":
        return False
    from verifier.judges.builtins import find_builtin  # the registry: only for `native`

    found = find_builtin(str(judge.spec.name))
    return found is not None and found.qualified_name == SCRIPT_BUILTIN


def refuse_config_inside_case(config_path: Path, case_dir: Path) -> None:
    """The agent writes the case; a config it could have written grades nothing."""
    if config_path.resolve().is_relative_to(case_dir.resolve()):
        raise ConfigError(
            str(config_path),
            "",
            f"lies inside the case dir {case_dir}, which the agent controls; "
            "keep eval.yaml outside it (e.g. /tests/eval.yaml)",
        )
