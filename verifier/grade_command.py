"""`verifier grade`: one case in, reward files out, one summary line on stdout.

Parsed with argparse rather than typer to keep start-up short (see verifier.cli).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from verifier.cli import guarded
from verifier.engine import DEFAULT_LLM_PARALLEL, DEFAULT_MEMORY_MB, Limits
from verifier.errors import EXIT_OK, OutputError, VerifierError
from verifier.grading import Grading, grade, load_eval, refuse_config_inside_case
from verifier.output import prepare_out_dir, remove_stale_rewards, write_outputs
from verifier.results import Status

EPILOG = """exit codes: 0 reward written (0.0 included); 2 eval.yaml or usage error;
3 case dir missing, unreadable or empty; 4 output dir not writable; 1 internal error.
No reward file is written unless the exit code is 0."""
TERMINATION_MESSAGE_BYTES = 4000


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """A fixed width: argparse builds a formatter for every add_argument, and asking the
    terminal for its width imports shutil (and bz2, lzma) on the grading path."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=100)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="verifier grade",
        description="Grade one case directory against eval.yaml and write the reward files.",
        epilog=EPILOG,
        formatter_class=_HelpFormatter,
    )
    env = os.environ.get
    parser.add_argument(
        "--config", type=Path, default=Path(env("VERIFIER_CONFIG", "/tests/eval.yaml")),
        help="eval.yaml ($VERIFIER_CONFIG, else /tests/eval.yaml)",
    )  # fmt: skip
    parser.add_argument(
        "--case", type=Path, default=Path(env("VERIFIER_CASE", "/case")),
        help="the agent's work dir ($VERIFIER_CASE, else /case)",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=Path(env("VERIFIER_OUT", "/logs/verifier")),
        help="where the reward files go ($VERIFIER_OUT, else /logs/verifier)",
    )  # fmt: skip
    parser.add_argument(
        "--memory-mb", type=positive_int,
        default=env("VERIFIER_JUDGE_MEMORY_MB", str(DEFAULT_MEMORY_MB)),
        help="memory limit of each judge process ($VERIFIER_JUDGE_MEMORY_MB, default %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--llm-parallel", type=positive_int,
        default=env("VERIFIER_LLM_PARALLEL", str(DEFAULT_LLM_PARALLEL)),
        help="LLM judges run at once ($VERIFIER_LLM_PARALLEL, default %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--no-llm", action="store_true", default=env("VERIFIER_NO_LLM", "") not in ("", "0"),
        help="skip LLM judges (skipped records), for dry runs ($VERIFIER_NO_LLM=1)",
    )  # fmt: skip
    parser.add_argument(
        "--termination-log", type=Path, default=env("VERIFIER_TERMINATION_LOG") or None,
        help="also write the summary line here, e.g. /dev/termination-log in Kubernetes "
        "($VERIFIER_TERMINATION_LOG)",
    )  # fmt: skip
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def positive_int(text: str) -> int:
    """argparse type (also applied to env-var defaults): a clear usage error, exit 2."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def run_grade(argv: list[str]) -> int:
    options = build_parser().parse_args(argv)
    return guarded(lambda: _grade(options), debug=options.debug)


def _grade(options: argparse.Namespace) -> int:
    try:
        loaded = load_eval(options.config)
        refuse_config_inside_case(options.config, options.case)
        for warning in loaded.config.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        prepare_out_dir(options.out)
        limits = Limits(
            memory_mb=options.memory_mb,
            llm_parallel=options.llm_parallel,
            skip_pools=frozenset({"llm"}) if options.no_llm else frozenset(),
        )
        grading = grade(loaded, options.case, limits)
    except OutputError:
        raise
    except VerifierError:
        remove_stale_rewards(options.out)
        raise
    _report_warnings(grading)
    written = write_outputs(options.out, grading)
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


def write_termination_message(path: Path | None, text: str) -> None:
    """Best effort: Kubernetes shows this file as the container's termination message.

    Its limit is 4096 bytes; outside a pod the path may not exist, which must not
    turn a written reward into a failure.
    """
    if path is None:
        return
    data = text.encode()[:TERMINATION_MESSAGE_BYTES].decode(errors="ignore")
    with contextlib.suppress(OSError):
        path.write_text(data + "\n", encoding="utf-8")


def _report_warnings(grading: Grading) -> None:
    for result in grading.results:
        if result.status in (Status.ERROR, Status.TIMEOUT):
            print(
                f"warning: judge {result.name}: {result.status.value}: {result.error}",
                file=sys.stderr,
            )
    for warning in (*grading.case_warnings, *grading.composition.warnings):
        print(f"warning: {warning}", file=sys.stderr)
