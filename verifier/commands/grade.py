"""`verifier grade`: one case in, reward files out, one summary line on stdout."""

from __future__ import annotations

import sys
from pathlib import Path

import attrs

from verifier.console import stopped_by_signals, warn, warn_all, write_termination_message
from verifier.engine import Limits
from verifier.errors import EXIT_OK, OutputError, Terminated, VerifierError
from verifier.grading import check_reward_keys, command_sandbox, grade, load_eval, with_llm_cache
from verifier.judges.base import Pool
from verifier.output import prepare_out_dir, remove_stale_rewards, write_outputs
from verifier.parsers import RewardKeys
from verifier.results import Grading
from verifier.system import process_started


@attrs.frozen
class GradeArgs:
    """What `verifier grade` was given (verifier.cli.options: its flags, variables and
    defaults, all applied)."""

    config: Path
    case: Path
    out: Path
    case_id: str | None
    step: str | None
    agent_logs: Path
    reward_keys: RewardKeys
    deadline: float | None
    memory_mb: int
    llm_parallel: int
    no_llm: bool
    llm_cache: Path | None
    no_llm_cache: bool
    llm_cache_mb: int
    termination_log: Path | None
    weak_sandbox: bool


def run(args: GradeArgs) -> int:
    started = process_started()  # --deadline counts from the process's start
    with stopped_by_signals():
        try:
            limits = Limits.asked(args.memory_mb, args.llm_parallel, args.no_llm)
            limits = limits.until(args.deadline, started)
            loaded = load_eval(args.config)
            check_reward_keys(loaded.config, args.reward_keys)
            warn_all(loaded.config.warnings)
            prepare_out_dir(args.out)
            cache = None if args.no_llm_cache else args.llm_cache
            if cache is not None:
                loaded = with_llm_cache(loaded, cache, args.llm_cache_mb, args.case)
            hidden = (args.out, args.agent_logs, cache)
            lanes = limits.capacity(Pool.CPU)
            with command_sandbox(
                loaded,
                hidden,
                case_dirs=(args.case,),
                accept_weak=args.weak_sandbox,
                lanes=lanes,
            ) as sandbox:
                grading = grade(
                    loaded,
                    args.case,
                    limits,
                    case_id=args.case_id,
                    step=args.step,
                    agent_logs=args.agent_logs,
                    sandbox=sandbox,
                )
            _report_warnings(grading)
            written = write_outputs(args.out, grading, reward_keys=args.reward_keys)
        except OutputError:
            raise
        except VerifierError as error:
            remove_stale_rewards(args.out, because=error.message)
            raise
        except (Terminated, KeyboardInterrupt):
            remove_stale_rewards(args.out, because="stopped by a signal")
            raise
    summary = summary_line(grading)
    print(summary)
    write_termination_message(args.termination_log, summary)
    for path in written:
        print(f"wrote {path}")
    return EXIT_OK


def summary_line(grading: Grading) -> str:
    """`reward=0.7500  [a=1.0, b=4.0, c=error]`: the reward and each judge at a glance."""
    shown = []
    for result in grading.results:
        value = float(result.value) if result.value is not None else result.status.value
        shown.append(f"{result.name}={value}")
    return f"reward={grading.reward:.4f}  [{', '.join(shown)}]"


def _report_warnings(grading: Grading) -> None:
    for result in grading.results:
        if result.failed:
            warn(f"judge {result.name}: {result.status.value}: {result.error}")
    warn_all((*grading.case_warnings, *grading.composition.warnings))
    sys.stderr.flush()
