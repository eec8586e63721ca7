"""Running code from the case (a command judge's command) where it cannot reach the grader.

The command gets an environment built from an allow-list (never the grader's
secrets), a HOME and TMPDIR of its own, no stdin (unless the caller hands it bytes to
read), and its own session. When the grader runs as root it runs as an unprivileged
user (65534 unless VERIFIER_SANDBOX_UID says otherwise) with no supplementary groups
and no way to gain privileges, in a private copy of the case owned by that user: it
can write there and nowhere the grader keeps anything. When the grader is not root it
runs as the grader's user, which the grader's processes keep out of their /proc
entries (see verifier.engine, processes.make_undumpable); everything it starts is
killed before any output file is written. Its output is streamed and only its start and a
bounded tail kept, so a command that prints gigabytes costs nothing.

Trusted files reach a command only when the caller hands them over (`provided`: copied
into a dir of the command's scratch, read-only to the sandbox user, named by
$VERIFIER_PROVIDED), and a command hands files back only through $VERIFIER_RESULTS
(`returned`: a dir of its scratch, outside the case, read back as bounded facts like
any case file): the trusted test runners write their reports there.

subprocess, tempfile, shutil and selectors are imported where a command runs, in the
judge's process: every batch worker imports this module, and each extension library
a worker has loaded makes every judge's fork and exit dearer.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import resource
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from verifier.casefiles import CaseFile, read_case_file, resolve_inside
from verifier.named import NamedTuple
from verifier.processes import (
    JUDGE_TOKEN_ENV,
    confine_with_landlock,
    die_with_parent,
    forbid_new_privileges,
    kill_trees,
    landlock_abi,
)

if TYPE_CHECKING:
    import subprocess

SANDBOX_UID_ENV = "VERIFIER_SANDBOX_UID"
DEFAULT_SANDBOX_UID = 65534  # nobody
TAIL_BYTES = 64 * 1024
HEAD_BYTES = 8 * 1024  # of the start of the output, kept apart when the tail cannot hold it
STDOUT_BYTES = 1024 * 1024  # of stdout kept for judges that compare it
MAX_COPY_BYTES = 4 * 1024**3  # of a case copied for the sandbox user
RETURNED_BYTES = 64 * 1024 * 1024  # of each file a command hands back in $VERIFIER_RESULTS
PROVIDED_ENV = "VERIFIER_PROVIDED"  # the dir of the trusted files handed to the command
RESULTS_ENV = "VERIFIER_RESULTS"  # the dir where it leaves the files it hands back
_STDIN_BYTES = 4096  # what a command may be handed on stdin: within any pipe's buffer
_DRAIN_BYTES = 1024 * 1024  # read after the command exits (its leftovers may write on)
_PASSED_ON = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_SANDBOX_NPROC = 4096  # processes the sandbox user may have, a fork bomb's ceiling
_SWITCH_USER_CAPABILITIES = (0, 6, 7)  # CAP_CHOWN, CAP_SETGID, CAP_SETUID


class CommandRun(NamedTuple):
    """How a command from the case ended."""

    exit_code: int | None  # None: killed (by its timeout or a signal)
    signal: int | None
    timed_out: bool
    tail: str  # the end of its output (stdout and stderr together, or stderr alone)
    cut_bytes: int  # output before the tail that was not kept
    confinement: str  # who it ran as, where, and what Landlock enforced
    stdout: str | None = None  # with separate_stdout: the end of stdout (stdout_bytes)
    stdout_cut_bytes: int = 0
    collected: Any = None  # what `after` returned
    start_error: str | None = None  # why it could not be executed (exec failed), else None
    # each file of `returned`: its bytes, or the fact that it is missing or unusable
    returned: Mapping[str, CaseFile] = MappingProxyType({})
    head: str = ""  # the first HEAD_BYTES of the output, when the tail does not begin there


class WorkdirProbe(Protocol):
    """Looks at the dir the command ran in (the case, or the sandbox's private copy of it),
    before it starts and after it and everything it started are gone."""

    def before(self, workdir: Path) -> None: ...

    def after(self, workdir: Path) -> Any: ...


def run_in_sandbox(
    command: str | list[str],
    case_dir: Path,
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    separate_stdout: bool = False,
    stdout_bytes: int = STDOUT_BYTES,
    probe: WorkdirProbe | None = None,
    cwd: str = "",
    provided: Mapping[str, Path] | None = None,
    returned: Sequence[str] = (),
    stdin: bytes | None = None,
) -> CommandRun:
    """Run command in the case dir (or a private copy of it) and return how it ended.

    `separate_stdout`: keep stdout apart (its last `stdout_bytes`) for judges that compare
    what a command prints, or read it as a report; `probe` sees the working dir before
    and after the run (what the command wrote there, e.g. a test report, exists only in
    the copy); `cwd`: a dir inside the case to start in (one that leads out of the case
    is refused);
    `provided`: trusted files (a name -> the file) copied into $VERIFIER_PROVIDED, which
    the sandbox user can read and not change; `returned`: the names of the files the
    command may leave in $VERIFIER_RESULTS, read back (RETURNED_BYTES each) into
    CommandRun.returned; `stdin`: bytes the command reads on its stdin, then EOF (a
    secret for a trusted helper to read before any code of the case runs), instead of
    no stdin at all."""
    import subprocess
    import tempfile

    as_root = can_switch_user()
    uid = sandbox_uid() if as_root else os.geteuid()
    abi = landlock_abi()
    with tempfile.TemporaryDirectory(prefix="verifier-sandbox-") as scratch:
        root = Path(scratch)
        home = root / "home"
        home.mkdir()
        copied = as_root and not _writable_by(case_dir, uid)
        try:
            workdir = _private_copy(case_dir, root / "case", uid) if copied else case_dir
        except (OSError, CaseCopyError) as error:
            problem = f"the case cannot be copied for the sandbox user: {error}"
            return CommandRun(None, None, False, problem, 0, _who(uid, copied, abi))
        start, problem = resolve_inside(workdir, cwd) if cwd else (workdir, None)
        if start is None or not start.is_dir():
            problem = f"its working dir {cwd} {problem or 'is not a directory in the case'}"
            return CommandRun(None, None, False, problem, 0, _who(uid, copied, abi))
        extra_env = dict(env or {})
        writable = [str(workdir), str(home)]
        if provided:
            extra_env[PROVIDED_ENV] = str(_provide(root / "provided", provided))
        results = root / "results"
        if returned:
            results.mkdir(0o700)
            writable.append(str(results))
            extra_env[RESULTS_ENV] = str(results)
        if as_root:
            os.chown(root, uid, uid)
            os.chown(home, uid, uid)
            if returned:
                os.chown(results, uid, uid)
        confine = functools.partial(_confine, abi, tuple(writable), as_root)
        if probe is not None:
            probe.before(workdir)
        try:
            process = subprocess.Popen(
                command,
                shell=isinstance(command, str),
                cwd=start,
                env=_environment(home, extra_env),
                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if separate_stdout else subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                user=uid if as_root else None,
                group=uid if as_root else None,
                extra_groups=[] if as_root else None,
                preexec_fn=confine,
            )
        except OSError as error:
            return CommandRun(None, None, False, f"could not start: {error}", 0,
                              _who(uid, copied, abi), start_error=str(error))  # fmt: skip
        if stdin is not None:
            _feed(process, stdin)
        output = _Tail(TAIL_BYTES)
        stdout = _Tail(stdout_bytes) if separate_stdout else output
        tails = {process.stdout.fileno(): stdout}  # type: ignore[union-attr]
        if process.stderr is not None:
            tails[process.stderr.fileno()] = output
        try:
            timed_out = _stream(process, tails, timeout)
        finally:
            kill_trees([process.pid])
            process.wait()
        collected = probe.after(workdir) if probe is not None else None
        handed_back = {name: read_case_file(results, name, RETURNED_BYTES) for name in returned}
    code = process.returncode
    signal_number = -code if code < 0 else None
    return CommandRun(
        exit_code=None if signal_number or timed_out else code,
        signal=signal_number,
        timed_out=timed_out,
        tail=output.text(),
        cut_bytes=output.cut,
        head=output.head_text(),
        confinement=_who(uid, copied, abi),
        stdout=stdout.text() if separate_stdout else None,
        stdout_cut_bytes=stdout.cut if separate_stdout else 0,
        collected=collected,
        returned=handed_back,
    )


def command_path(extra: Mapping[str, str] | None = None) -> str:
    """The PATH a command gets: the grader's (or the default), unless `env` sets one."""
    return (extra or {}).get("PATH") or os.environ.get("PATH") or _DEFAULT_PATH


def can_switch_user() -> bool:
    """Root with the capabilities to hand a copy of the case to another user and become it
    (CAP_CHOWN, CAP_SETGID, CAP_SETUID). Root without them (`--cap-drop ALL`) is treated
    like any other UID: the command runs as the grader's user."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            effective = next(line for line in handle if line.startswith("CapEff:"))
    except (OSError, StopIteration):
        return False
    capabilities = int(effective.split()[1], 16)
    return all(capabilities >> bit & 1 for bit in _SWITCH_USER_CAPABILITIES)


def sandbox_uid() -> int:
    text = os.environ.get(SANDBOX_UID_ENV, "").strip()
    if not text:
        return DEFAULT_SANDBOX_UID
    uid = int(text) if text.isdigit() else -1
    if uid <= 0:
        raise ValueError(f"${SANDBOX_UID_ENV} {text!r} must be a user id above 0")
    return uid


def _environment(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """The allow-list: PATH, locale and time zone, a HOME and TMPDIR of its own, the
    judge's token (so that an orphan is attributed to it), and the author's `env`."""
    environment = {name: os.environ[name] for name in _PASSED_ON if name in os.environ}
    environment.setdefault("PATH", _DEFAULT_PATH)
    environment.update(HOME=str(home), TMPDIR=str(home), **dict(extra))
    if JUDGE_TOKEN_ENV in os.environ:
        environment[JUDGE_TOKEN_ENV] = os.environ[JUDGE_TOKEN_ENV]
    return environment


class CaseCopyError(Exception):
    """The case cannot be copied for the sandbox user: a fact about the case."""


def _private_copy(case_dir: Path, target: Path, uid: int) -> Path:
    """The case, copied for the sandbox user to read and write: directories, regular files
    and symlinks (as links); FIFOs, sockets and devices are left out. Iterative, and
    bounded in bytes, so that no case can exhaust the grader's disk or stack."""
    import shutil

    copied = 0
    stack = [(case_dir, target)]
    while stack:
        source, destination = stack.pop()
        os.mkdir(destination, 0o755)
        os.lchown(destination, uid, uid)
        with os.scandir(source) as entries:
            for entry in entries:
                to = os.path.join(destination, entry.name)
                if entry.is_symlink():
                    os.symlink(os.readlink(entry.path), to)
                elif entry.is_dir(follow_symlinks=False):
                    stack.append((Path(entry.path), Path(to)))
                    continue
                elif entry.is_file(follow_symlinks=False):
                    copied += entry.stat(follow_symlinks=False).st_size
                    if copied > MAX_COPY_BYTES:
                        raise CaseCopyError(f"the case is over {MAX_COPY_BYTES} bytes")
                    shutil.copyfile(entry.path, to, follow_symlinks=False)
                else:
                    continue
                os.lchown(to, uid, uid)
    return target


def _feed(process: subprocess.Popen[bytes], data: bytes) -> None:
    """data on the command's stdin, then EOF: small enough for the pipe's buffer, so this
    never waits on the command."""
    assert process.stdin is not None and len(data) <= _STDIN_BYTES
    with contextlib.suppress(BrokenPipeError):  # it is gone already: its end says why
        process.stdin.write(data)
    with contextlib.suppress(BrokenPipeError):
        process.stdin.close()


def _provide(directory: Path, files: Mapping[str, Path]) -> Path:
    """The trusted files, copied into directory: readable by anyone, writable by the
    grader alone (the sandbox user can read them and change nothing)."""
    import shutil

    directory.mkdir(0o755)
    for name, source in files.items():
        if "/" in name or name in ("", ".", ".."):
            raise ValueError(f"a provided file's name must be a plain file name, not {name!r}")
        target = directory / name
        shutil.copyfile(source, target)
        target.chmod(0o644)
    return directory


def _confine(abi: int, writable: tuple[str, ...], as_root: bool) -> None:
    """In the command's process, before exec: no privileges to gain, death with its
    judge, Landlock (writes beneath `writable` only; no signals out of its domain), and
    as another user a ceiling on its processes."""
    forbid_new_privileges()
    die_with_parent()
    if abi:
        confine_with_landlock(abi, writable)
    if as_root:
        limits = resource.getrlimit(resource.RLIMIT_NPROC)
        soft, hard = (
            _SANDBOX_NPROC if limit == resource.RLIM_INFINITY else min(limit, _SANDBOX_NPROC)
            for limit in limits
        )
        resource.setrlimit(resource.RLIMIT_NPROC, (min(soft, hard), hard))


def _writable_by(directory: Path, uid: int) -> bool:
    """Whether uid may write directory in place: it owns it or anyone may."""
    info = os.stat(directory)
    return info.st_uid == uid or bool(info.st_mode & stat.S_IWOTH)


def _stream(process: subprocess.Popen[bytes], tails: Mapping[int, _Tail], timeout: float) -> bool:
    """Read the command's output pipes into their tails until it exits (False) or its
    time is up (True).

    Reading stops when the command exits, not at the end of its output: what it left
    in the background may hold the pipe open for ever.
    """
    import selectors

    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        for fd in tails:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        while process.poll() is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            for key, _ in selector.select(timeout=min(remaining, 0.1)):
                tails[key.fd].read(key.fd, limit=_DRAIN_BYTES)
    for fd, tail in tails.items():
        tail.read(fd, limit=_DRAIN_BYTES)
    return False


class _Tail:
    """The last `size` bytes of a stream, how much came before them, and its first
    HEAD_BYTES (a command's first error is often as telling as its last line)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.chunks: collections.deque[bytes] = collections.deque()
        self.kept = 0
        self.cut = 0
        self.head = b""

    def read(self, fd: int, limit: int) -> None:
        """Whatever fd has now, up to limit bytes (a flood must not stop the clock)."""
        taken = 0
        while taken < limit:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                return
            taken += len(chunk)
            if len(self.head) < HEAD_BYTES:
                self.head += chunk[: HEAD_BYTES - len(self.head)]
            self.chunks.append(chunk)
            self.kept += len(chunk)
            while self.kept - len(self.chunks[0]) >= self.size:
                dropped = self.chunks.popleft()
                self.kept -= len(dropped)
                self.cut += len(dropped)

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")

    def head_text(self) -> str:
        """The start of the stream up to where the tail begins, when the tail lost it."""
        return self.head[: self.cut].decode("utf-8", errors="replace")


def _who(uid: int, copied: bool, abi: int) -> str:
    """How the command was confined, for the judge's details."""
    who = "the grader's UID" if uid == os.geteuid() else f"UID {uid}"
    where = "a private copy of the case" if copied else "the case dir"
    if abi >= 6:
        landlock = f"Landlock ABI {abi}: writes to its dirs only, no signals out"
    elif abi:
        landlock = f"Landlock ABI {abi}: writes to its dirs only"
    else:
        landlock = "no Landlock in this kernel"
    return f"{who}, in {where}, {landlock}"
