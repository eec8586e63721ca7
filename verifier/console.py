"""What a command says to its user, and how it ends: one-line errors, warnings, exit codes.

Every command runs inside `guarded`, so a VerifierError anywhere below becomes its
one-line message and documented exit code, and anything else an "internal error"
line (a traceback only with --debug).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, NoReturn

from verifier.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    Terminated,
    VerifierError,
)

TERMINATION_MESSAGE_BYTES = 4000


def guarded(command: Callable[[], int], *, debug: bool) -> int:
    """Run a command; a VerifierError becomes its one-line message and exit code."""
    try:
        return command()
    except VerifierError as error:
        if debug:
            import traceback  # only here: it costs start-up time on the grading path

            traceback.print_exc()
        print(f"verifier: error: {error.message}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("verifier: interrupted (SIGINT); no reward written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print("verifier: terminated (SIGTERM); no reward written", file=sys.stderr)
        return EXIT_TERMINATED
    except Exception as error:
        if isinstance(error, BrokenPipeError) and reader_gone():
            end_by_closed_pipe()
        if debug:
            raise
        print(
            f"verifier: internal error: {type(error).__name__}: {error} "
            "(rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def signal_name(number: int) -> str:
    """A signal's name, for any number a process can die or be stopped by: SIGTERM,
    SIGRTMIN+6 for a real-time one (signal.Signals has no member for 35..64), else
    "signal N"."""
    try:
        return signal.Signals(number).name
    except ValueError:
        pass
    low, high = getattr(signal, "SIGRTMIN", 0), getattr(signal, "SIGRTMAX", -1)
    if low <= number <= high:
        return (
            f"SIGRTMIN+{number - low}"
            if number - low <= (high - low) // 2
            else f"SIGRTMAX-{high - number}"
        )
    return f"signal {number}"


@contextlib.contextmanager
def stopped_by_signals() -> Iterator[None]:
    """SIGTERM raises Terminated and SIGINT KeyboardInterrupt while the block runs, also
    when this process is PID 1 in a container (where unhandled signals are ignored), so
    that the code below stops, cleans up (its `finally` blocks) and exits 143 / 130."""

    def terminate(_signum: int, _frame: object) -> None:
        raise Terminated

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = {
        signum: signal.signal(signum, handler)
        for signum, handler in ((signal.SIGTERM, terminate), (signal.SIGINT, interrupt))
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def warn(message: str, stream: IO[str] | None = None) -> None:
    print(f"warning: {message}", file=stream if stream is not None else sys.stderr)


def warn_all(messages: Iterable[str], stream: IO[str] | None = None) -> None:
    for message in messages:
        warn(message, stream)


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


def exit_without_teardown(code: int) -> NoReturn:
    """Exit once the output is flushed, skipping the interpreter's teardown.

    By then grading holds nothing to finalize (files are closed, judge processes
    reaped), and tearing down the modules would only lengthen a short process.
    """
    flush_output()
    os._exit(code)


def flush_output() -> None:
    """Flush stdout and stderr before the exit. A reader that went away (`verifier ...
    | head -1`) ends the process by SIGPIPE (end_by_closed_pipe); any other failure
    to flush is left alone: what the command wrote to files is written by then."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            end_by_closed_pipe()
        except (OSError, ValueError):
            pass


def reader_gone() -> bool:
    """Whether stdout or stderr is a pipe whose reading end is closed (poll reports an
    error on one), so that a BrokenPipeError of another pipe (a judge's, a socket) is
    never taken for it."""
    poller = select.poll()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            poller.register(stream.fileno(), select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def end_by_closed_pipe() -> NoReturn:
    """End as `yes | head -1` ends `yes`: killed by SIGPIPE, without a word (a shell
    shows 141): the reader wanted no more output, which is no error of the command.
    Python ignores SIGPIPE, so the error reached here; stdout and stderr are pointed at
    /dev/null first, so that nothing is written, or fails, on the way out."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            os.dup2(devnull, stream.fileno())
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGPIPE})
    os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(EXIT_BROKEN_PIPE)  # not reached: SIGPIPE's default action ends the process
