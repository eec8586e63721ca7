"""`verifier grade`: one case in, reward files out, one summary line on stdout."""

from __future__ import annotations

import sys

from verifier.console import stopped_by_signals, warn, warn_all, write_termination_message
from verifier.engine import Limits
from verifier.errors import EXIT_OK, OutputError, Terminated, VerifierError
from verifier.grading import check_reward_keys, command_sandbox, grade, load_eval, with_llm_cache
from verifier.judges.base import Pool
from verifier.options import Options
from verifier.output import prepare_out_dir, remove_stale_rewards, write_outputs
from verifier.results import Grading
from verifier.system import process_started


def run(options: Options) -> int:
    started = process_started()  # --deadline counts from the process's start
    with stopped_by_signals():
        try:
            limits = Limits.from_options(options).until(options.deadline, started)
            loaded = load_eval(options.config)
            check_reward_keys(loaded.config, options.reward_keys)
            warn_all(loaded.config.warnings)
            prepare_out_dir(options.out)
            cache = None if options.no_llm_cache else options.llm_cache
            if cache is not None:
                loaded = with_llm_cache(loaded, cache, options.llm_cache_mb, options.case)
            hidden = (options.out, options.agent_logs, cache)
            lanes = limits.capacity(Pool.CPU)
            with command_sandbox(
                loaded,
                hidden,
                case_dirs=(options.case,),
                accept_weak=options.weak_sandbox,
                lanes=lanes,
            ) as sandbox:
                grading = grade(
                    loaded,
                    options.case,
                    limits,
                    case_id=options.case_id,
                    step=options.step,
                    agent_logs=options.agent_logs,
                    sandbox=sandbox,
                )
            _report_warnings(grading)
            written = write_outputs(options.out, grading, reward_keys=options.reward_keys)
        except OutputError:
            raise
        except VerifierError as error:
            remove_stale_rewards(options.out, because=error.message)
            raise
        except (Terminated, KeyboardInterrupt):
            remove_stale_rewards(options.out, because="stopped by a signal")
            raise
    summary = summary_line(grading)
    print(summary)
    write_termination_message(options.termination_log, summary)
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
