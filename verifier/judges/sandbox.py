"""Running code from the case (a command judge's command) where it cannot reach the grader.

The command gets an environment built from an allow-list (never the grader's
secrets), a HOME and TMPDIR of its own, no stdin (unless the caller hands it bytes to
read), its own session, no way to gain privileges, and its own private copy of the case
(verifier.judges.workcopy), so that its writes reach no other judge. What the grader
keeps is hidden from it: the grading config's dir, the out dir, the agent's logs, the
grader's scratch and every other command's copy, in a batch the cases and their out
dirs, and the usual secret mounts (`SandboxPolicy`, fixed once per grade or batch
before any judge forks). Landlock hides them (reads, writes and runs are allowed only
beneath the rest of the file system and the command's own dirs), or, where the kernel
has no Landlock and the grader is root, the file modes do (the command then runs as an
unprivileged UID that cannot enter them). When neither holds the sandbox is *weak*,
and a grade that runs code from the case stops before grading unless the user
accepted that (`--weak-sandbox`).

Trusted files reach a command only when the caller hands them over (`provided`: copied
into a dir of the command's scratch, read-only to it, named by $VERIFIER_PROVIDED), and
a command hands files back only through $VERIFIER_RESULTS (`returned`: a dir of its
scratch, outside the case, read back as bounded facts like any case file): the
trusted test runners write their reports there.

As root the command runs as an unprivileged user (65534 unless VERIFIER_SANDBOX_UID
says otherwise; in a batch one UID per worker, counting down, so that a case cannot
reach a sibling's files or its process limit) with no supplementary groups. As any
other UID it runs as the grader's, which the grader's processes keep out of their
/proc entries (processes.make_undumpable); what Landlock does not govern (chmod,
chown, ACLs, truncate(2) of what that UID owns) goes through a seccomp supervisor
that allows it only beneath the command's own dirs (verifier.judges.supervisor).
Everything it starts is killed before any output file is written. Its output is
streamed and only a bounded tail kept, so a command that prints gigabytes costs
nothing.

subprocess, tempfile, shutil, socket and selectors are imported where a command runs,
in the judge's process: every batch worker imports this module, and each extension
library a worker has loaded makes every judge's fork and exit dearer.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import resource
import stat
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from verifier.casefiles import CaseFile, read_case_file, resolve_inside
from verifier.errors import OutOfProcessesError
from verifier.processes import (
    JUDGE_TOKEN_ENV,
    confine_with_landlock,
    die_with_parent,
    forbid_new_privileges,
    kill_trees,
    landlock_abi,
)
from verifier.system import cgroup_pids_max

if TYPE_CHECKING:
    import socket
    import subprocess

    from verifier.judges.supervisor import Supervisor

SANDBOX_UID_ENV = "VERIFIER_SANDBOX_UID"
DEFAULT_SANDBOX_UID = 65534  # nobody; a batch's other workers count down from it
PROVIDED_ENV = "VERIFIER_PROVIDED"
TAIL_BYTES = 64 * 1024
HEAD_BYTES = 8 * 1024  # of the start of the output, kept apart when the tail cannot hold it
STDOUT_BYTES = 1024 * 1024  # of stdout kept for judges that compare it
RETURNED_BYTES = 64 * 1024 * 1024  # of each file a command hands back in $VERIFIER_RESULTS
RESULTS_ENV = "VERIFIER_RESULTS"  # the dir where it leaves the files it hands back
SECRET_MOUNTS = ("/run/secrets", "/var/run/secrets")  # Docker's, Kubernetes' tokens
MAX_PROCESSES = 4096  # a command's ceiling (per UID): a fork bomb's
_STDIN_BYTES = 4096  # what a command may be handed on stdin: within any pipe's buffer
_DRAIN_BYTES = 1024 * 1024  # read after the command exits (its leftovers may write on)
_PASSED_ON = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_SWITCH_USER_CAPABILITIES = (0, 6, 7)  # CAP_CHOWN, CAP_SETGID, CAP_SETUID
_PROCESS_RESERVE = 128  # processes the grader keeps for itself below a finite limit
_SPACE_CHECK_S = 0.1  # how often the temp space is looked at while a command runs


@attrs.frozen
class CommandRun:
    """How a command from the case ended."""

    exit_code: int | None  # None: killed (by its timeout or a signal), or never started
    signal: int | None
    timed_out: bool
    tail: str  # the end of its output (stdout and stderr together, or stderr alone)
    cut_bytes: int  # output before the tail that was not kept
    confinement: str  # who it ran as, where, and what hid the grader from it
    stdout: str | None = None  # with separate_stdout: the end of stdout (stdout_bytes)
    stdout_cut_bytes: int = 0
    collected: Any = None  # what `after` returned
    start_error: str | None = None  # why it could not be executed (exec failed), else None
    # each file of `returned`: its bytes, or the fact that it is missing or unusable
    returned: Mapping[str, CaseFile] = MappingProxyType({})
    head: str = ""  # the first HEAD_BYTES of the output, when the tail does not begin there


class WorkdirProbe(Protocol):
    """Looks at the dir the command ran in (its private copy of the case), before it
    starts and after it and everything it started are gone."""

    def before(self, workdir: Path) -> None: ...

    def after(self, workdir: Path) -> Any: ...


# --- the policy: what is hidden, and how well -------------------------------------------


@attrs.frozen
class SandboxPolicy:
    """How commands are confined for one grade or batch, fixed before any judge forks.

    `hidden`: the grader's paths a command must not read; `readable`: what it may read
    instead (Landlock rules: every sibling on the way from / down to each hidden path;
    the ancestors themselves are then not listable); `scratch`: the dir beneath which
    every command's copy and HOME are made (hidden itself). `hidden_by` says what keeps
    the hidden paths out of reach ("Landlock", "file modes"); `weakness`, when nothing
    does, why (then `accept_weak` says whether the user took that)."""

    hidden: tuple[str, ...]
    hidden_ids: frozenset[tuple[int, int]]  # their (st_dev, st_ino): left out of copies
    readable: tuple[str, ...]
    scratch: str
    landlock: int  # the ABI (0: none)
    as_root: bool  # commands run as another UID
    uid: int  # the UID commands run as (that of this process's slot and lane, as root)
    base_uid: int  # slot 0's lane 0's
    lanes: int  # UIDs per slot
    slot: int
    side_by_side: int  # commands that may run at once (slots x lanes)
    processes: int  # each command's RLIMIT_NPROC
    supervised: bool  # chmod and the rest go through the supervisor
    hidden_by: str | None
    weakness: str | None
    accept_weak: bool = False

    @property
    def refused(self) -> bool:
        return self.weakness is not None and not self.accept_weak


_policy: SandboxPolicy | None = None
_deferred: dict[str, Any] = {}  # plan_policy's arguments, for a policy made on first use


def plan_policy(
    hidden: Iterable[str | os.PathLike[str]] = (),
    *,
    accept_weak: bool = False,
    slots: int = 1,
    lanes: int = 1,
    slot: int = 0,
    lane: int = 0,
    scratch_root: str | None = None,
) -> SandboxPolicy:
    """The policy for commands that must not read `hidden` (and SECRET_MOUNTS); it makes
    the scratch dir (remove it with `discard_policy`; OSError when it cannot).

    `slots`: how many cases run side by side (a batch's workers); `lanes`: how many
    judges of a case. As root each (slot, lane) has a UID of its own, counting down
    from the sandbox UID, so that no command can reach another's copy or use up its
    processes. `slot`, `lane`: those of this process (use_slot, use_lane). ValueError
    when VERIFIER_SANDBOX_UID leaves no UID for one."""
    as_root = can_switch_user()
    base = sandbox_uid() if as_root else os.geteuid()
    count = slots * lanes
    if as_root and base - count + 1 < 1:
        raise ValueError(
            f"${SANDBOX_UID_ENV} {base}: {slots} workers of {lanes} judges "
            f"need the UIDs {base - count + 1}..{base}, all above 0"
        )
    scratch = _make_scratch(scratch_root, as_root)
    paths = {_resolved(path) for path in (*hidden, *SECRET_MOUNTS)}
    paths.add(os.path.dirname(scratch))  # every grader's scratch, of this UID
    existing = _outermost(path for path in paths if path is not None and os.path.lexists(path))
    abi = landlock_abi()
    uids = [base - index for index in range(count)] if as_root else [base]
    others = [path for path in existing if path != os.path.dirname(scratch)]
    hidden_by, weakness = _strength(others, abi, as_root, uids)
    supervised = not as_root and abi > 0 and _supervision_works()
    if not as_root and abi > 0 and not supervised and weakness is None:
        weakness = (
            "seccomp user notification is not available here, so a command "
            "could chmod what the grader owns"
        )
    return SandboxPolicy(
        hidden=existing,
        hidden_ids=frozenset(filter(None, map(_identity, existing))),
        readable=tuple(readable_around(existing)),
        scratch=scratch,
        landlock=abi,
        as_root=as_root,
        uid=base - slot * lanes - lane if as_root else base,
        base_uid=base,
        lanes=lanes,
        slot=slot,
        side_by_side=count,
        processes=process_ceiling(count, as_root),
        supervised=supervised,
        hidden_by=hidden_by,
        weakness=weakness,
        accept_weak=accept_weak,
    )


def install_policy(policy: SandboxPolicy | None) -> SandboxPolicy | None:
    """Make `policy` the one commands of this process (and of the judges it forks) run
    under; returns the previous one."""
    global _policy
    previous, _policy = _policy, policy
    return previous


def defer_policy(hidden: Iterable[str | os.PathLike[str]] = (), **arguments: Any) -> None:
    """What plan_policy is to be given should a command run after all (a grade whose
    judges run none: planning costs a fork and a few listings, which grades without
    commands need not pay). The process that first runs one plans it."""
    install_policy(None)
    _deferred.clear()
    _deferred.update(arguments, hidden=tuple(hidden))


def current_policy() -> SandboxPolicy:
    """The installed policy; else one planned now, from what defer_policy was given
    (by default hiding only the secret mounts and the scratch)."""
    if _policy is None:
        import atexit

        policy = _plan_deferred()
        atexit.register(discard_policy, policy)  # (a judge's process ends without atexit)
        install_policy(policy)
    assert _policy is not None
    return _policy


@contextlib.contextmanager
def policy_for_run() -> Iterator[None]:
    """For one run of judges that run commands: the installed policy, or else one planned
    for the run (from what defer_policy was given), so that its judges' processes share
    it and it sees the file system as it is now; removed after it."""
    if _policy is not None:
        yield
        return
    policy = _plan_deferred()
    install_policy(policy)
    try:
        yield
    finally:
        install_policy(None)
        discard_policy(policy)


def _plan_deferred() -> SandboxPolicy:
    arguments = dict(_deferred)
    return plan_policy(arguments.pop("hidden", ()), **arguments)


def use_slot(slot: int) -> None:
    """In a batch worker: its cases' commands run as the slot's own UIDs (root), so that
    no case can reach a sibling's copies or use up its processes."""
    _use(slot=slot, lane=0)


def use_lane(lane: int) -> None:
    """In a judge's process: its commands run as its lane's own UID (root), so that no
    command reaches the copy of a judge running beside it."""
    _use(lane=lane)


def _use(**where: int) -> None:
    if _policy is None:
        _deferred.update(where)
    elif _policy.as_root:
        slot, lane = where.get("slot", _policy.slot), where["lane"]
        lane = min(lane, _policy.lanes - 1)
        uid = _policy.base_uid - slot * _policy.lanes - lane
        install_policy(attrs.evolve(_policy, uid=uid, slot=slot))


def discard_policy(policy: SandboxPolicy) -> None:
    """Remove the policy's scratch dir (and anything a killed command left in it)."""
    import shutil

    shutil.rmtree(policy.scratch, ignore_errors=True)


def readable_around(hidden: Collection[str]) -> list[str]:
    """What a command may read when `hidden` (absolute, resolved) must stay out of its
    reach: walking from / down to each hidden path, every entry on the way that neither
    is hidden nor leads to one. (Nothing hidden: all of /; / hidden: nothing.)"""
    if not hidden:
        return ["/"]
    if "/" in hidden:
        return []
    from verifier.judges.workcopy import parents

    ancestors = {parent for path in hidden for parent in parents(path)}
    granted = []
    pending = ["/"]
    while pending:
        directory = pending.pop()
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            if path in hidden:
                continue
            if path in ancestors:
                pending.append(path)
            else:
                granted.append(path)
    return granted


def _outermost(paths: Iterable[str]) -> tuple[str, ...]:
    """The paths, less those beneath another one of them."""
    chosen: list[str] = []
    for path in sorted(set(paths), key=len):
        if not any(path == kept or path.startswith(kept.rstrip("/") + "/") for kept in chosen):
            chosen.append(path)
    return tuple(sorted(chosen))


def _identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _resolved(path: str | os.PathLike[str]) -> str | None:
    try:
        return os.path.realpath(os.fspath(path))
    except (OSError, ValueError):
        return None


def _make_scratch(root: str | None, as_root: bool) -> str:
    """A fresh dir for this grade's commands, inside this UID's scratch parent (which
    every grader of this UID hides from its commands): traversable by the sandbox users
    as root (0711: they cannot list it), this UID's alone otherwise."""
    import tempfile

    parent = os.path.join(root or tempfile.gettempdir(), f"verifier-sandbox-{os.geteuid()}")
    mode = 0o711 if as_root else 0o700
    with contextlib.suppress(FileExistsError):
        os.mkdir(parent, mode)
    info = os.lstat(parent)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        parent = tempfile.mkdtemp(prefix="verifier-sandbox-", dir=root)  # someone else's name
    os.chmod(parent, mode)
    scratch = tempfile.mkdtemp(prefix="grade-", dir=parent)
    os.chmod(scratch, mode)
    return scratch


def _strength(
    hidden: Collection[str], abi: int, as_root: bool, uids: Collection[int]
) -> tuple[str | None, str | None]:
    """(what hides the paths, None) or (None, why nothing does). (The scratch is hidden
    by how it is made: a parent others cannot list, a dir per command that only its UID
    may enter.)"""
    if abi > 0:
        return "Landlock", None
    if not as_root:
        return None, (
            "this kernel has no Landlock and the grader is not root, so a command "
            "would run as the grader's UID and could read what it reads"
        )
    for path in hidden:
        for uid in uids:
            if not denies_entry(path, uid, uid):
                return None, (
                    f"this kernel has no Landlock, and {path} is open to UID {uid} "
                    "(make it or a parent dir unsearchable to other users)"
                )
    return "file modes", None


def denies_entry(path: str, uid: int, gid: int) -> bool:
    """Whether a process of uid and gid (no other groups) cannot enter path: some dir
    on the way, or path itself, it may not search, owned by someone else (an owner could
    chmod it back) and without an ACL (which could grant it)."""
    from verifier.judges.workcopy import parents

    for component in [path, *parents(path)]:
        try:
            info = os.stat(component)
        except OSError:
            return True  # gone: nothing to read
        if info.st_uid == uid or _has_acl(component):
            continue
        bits = (info.st_mode >> 3) if info.st_gid == gid else info.st_mode
        if not bits & 0o1:
            return True
    return False


def _has_acl(path: str) -> bool:
    try:
        os.getxattr(path, "system.posix_acl_access")
    except OSError:
        return False
    return True


def process_ceiling(uids: int, as_root: bool) -> int:
    """Each command's RLIMIT_NPROC: at most MAX_PROCESSES, and below the finite limits of
    this UID and of the cgroup (pids.max) by a reserve, so that the grader can still fork
    when commands have used up theirs; as root, the cgroup's share of each of the `uids`
    sandbox UIDs."""
    ceiling = MAX_PROCESSES
    pids = cgroup_pids_max()
    if as_root:
        if pids is not None:
            ceiling = min(ceiling, (pids - _reserve(pids)) // uids)
    else:
        soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
        for limit in (soft if soft != resource.RLIM_INFINITY else None, pids):
            if limit is not None:
                ceiling = min(ceiling, limit - _reserve(limit))
    return max(ceiling, 1)


def _reserve(limit: int) -> int:
    return min(_PROCESS_RESERVE, limit // 4)


@functools.cache
def _supervision_works() -> bool:
    """Whether this kernel (and the container's seccomp profile) lets a command install
    the supervisor's filter: tried once, in a forked child (OutOfProcessesError when no
    child can be forked)."""
    from verifier.judges.supervisor import install_seccomp, supervised_program

    try:
        pid = os.fork()
    except BlockingIOError as error:
        raise OutOfProcessesError(
            f"cannot start a process ({error.strerror}): this UID's or this container's "
            "process limit is reached (ulimit -u, pids.max); raise it"
        ) from None
    if pid == 0:
        code = 1
        try:
            forbid_new_privileges()
            os.close(install_seccomp(supervised_program(), listener=True))
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


# --- running one command --------------------------------------------------------------


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
    """Run command in its own copy of the case dir and return how it ended.

    `separate_stdout`: keep stdout apart (its last `stdout_bytes`) for judges that compare
    what a command prints, or read it as a report; `probe` sees the copy before and
    after the run (what the command wrote exists only there, e.g. a test report); `cwd`:
    a dir inside the case to start in (one that leads out of the case is refused);
    `provided`: trusted files handed to the command (relative name -> file), copied
    read-only into a dir whose path is in $VERIFIER_PROVIDED (OSError when one cannot
    be read: the author's fault, not the case's); `returned`: the names of the files the
    command may leave in $VERIFIER_RESULTS, read back (RETURNED_BYTES each) into
    CommandRun.returned; `stdin`: bytes the command reads on its stdin, then EOF (a
    secret for a trusted helper to read before any code of the case runs), instead of
    no stdin at all."""
    import subprocess
    import tempfile

    policy = current_policy()
    confinement = describe_confinement(policy)
    if policy.refused:
        problem = f"refused to run: the sandbox is weak here ({policy.weakness})"
        return CommandRun(None, None, False, problem, 0, confinement)
    names = _provided_names(provided or {})
    uid = policy.uid if policy.as_root else None
    with tempfile.TemporaryDirectory(
        prefix="command-", dir=policy.scratch, ignore_cleanup_errors=True
    ) as scratch:
        root = Path(scratch)
        home, workdir, given = root / "home", root / "case", root / "provided"
        results = root / "results"
        home.mkdir()
        if returned:
            results.mkdir(0o700)
        if uid is not None:
            os.chown(root, uid, uid)
            os.chown(home, uid, uid)
            if returned:
                os.chown(results, uid, uid)
        if names:
            _provide(given, names)
        from verifier.judges.workcopy import CaseCopyError, copy_case

        try:
            copy_case(str(case_dir), str(workdir), uid, policy.hidden_ids)
        except (OSError, CaseCopyError) as error:
            problem = f"the case cannot be copied for the command: {error}"
            return CommandRun(None, None, False, problem, 0, confinement)
        start, outside = resolve_inside(workdir, cwd) if cwd else (workdir, None)
        if start is None or not start.is_dir():
            problem = f"its working dir {cwd} {outside or 'is not a directory in the case'}"
            return CommandRun(None, None, False, problem, 0, confinement)
        own = (str(workdir), str(home), *([str(results)] if returned else []))
        readable = (*policy.readable, *([str(given)] if names else []))
        channel = _listener_channel() if policy.supervised else None
        listen = _supervision_installer() if channel is not None else None
        confine = functools.partial(_confine, policy, own, readable, channel, listen)
        if probe is not None:
            probe.before(workdir)
        environment = _environment(
            home, env or {}, given if names else None, results if returned else None
        )
        try:
            process = subprocess.Popen(
                command,
                shell=isinstance(command, str),
                cwd=start,
                env=environment,
                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if separate_stdout else subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                user=uid,
                group=uid,
                extra_groups=[] if uid is not None else None,
                preexec_fn=confine,
            )
        except OSError as error:  # exec failed: the program is missing, or not executable
            _close_channel(channel)
            return CommandRun(
                None,
                None,
                False,
                f"could not start: {error}",
                0,
                confinement,
                start_error=str(error),
            )
        except subprocess.SubprocessError as error:  # _confine failed: nothing of the case's
            _close_channel(channel)
            raise RuntimeError(
                f"the command could not be confined ({error}): no verdict on the case"
            ) from None
        supervisor = _supervisor(channel, own)
        if stdin is not None:
            _feed(process, stdin)
        output = _Tail(TAIL_BYTES)
        stdout = _Tail(stdout_bytes) if separate_stdout else output
        tails = {process.stdout.fileno(): stdout}  # type: ignore[union-attr]
        if process.stderr is not None:
            tails[process.stderr.fileno()] = output
        space = functools.partial(_filling_the_temp_space, policy, root)
        try:
            timed_out, stopped = _stream(process, tails, timeout, supervisor, space)
            if stopped is not None:
                output.note(stopped)
        finally:
            kill_trees([process.pid])
            process.wait()
            if supervisor is not None:
                supervisor.close()
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
        confinement=confinement,
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


def _environment(
    home: Path, extra: Mapping[str, str], given: Path | None, results: Path | None
) -> dict[str, str]:
    """The allow-list: PATH, locale and time zone, a HOME and TMPDIR of its own, the
    judge's token (so that an orphan is attributed to it), where the provided files
    are and where it hands files back, and the author's `env`."""
    environment = {name: os.environ[name] for name in _PASSED_ON if name in os.environ}
    environment.setdefault("PATH", _DEFAULT_PATH)
    environment.update(HOME=str(home), TMPDIR=str(home), **dict(extra))
    if given is not None:
        environment[PROVIDED_ENV] = str(given)
    if results is not None:
        environment[RESULTS_ENV] = str(results)
    if JUDGE_TOKEN_ENV in os.environ:
        environment[JUDGE_TOKEN_ENV] = os.environ[JUDGE_TOKEN_ENV]
    return environment


def _provided_names(provided: Mapping[str, Path]) -> dict[PurePosixPath, Path]:
    """The provided files by their relative names; ValueError for a name that is not one
    (absolute, empty, with `..`), which eval.yaml's loader refuses first."""
    names = {}
    for name, source in provided.items():
        relative = PurePosixPath(name)
        if relative.is_absolute() or not relative.parts or ".." in relative.parts or "\0" in name:
            raise ValueError(f"provided name {name!r} must be a relative path inside the dir")
        names[relative] = Path(source)
    return names


def _provide(given: Path, names: Mapping[PurePosixPath, Path]) -> None:
    """Copy each trusted file to given/<name>, read-only to everyone (and, as root,
    owned by root: the sandbox user cannot change it)."""
    import shutil

    for relative, source in names.items():
        target = given.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(source, target)
        except OSError as error:
            raise OSError(
                error.errno, f"provided file {source} cannot be copied: {error.strerror}"
            ) from None
        target.chmod(0o555 if os.access(source, os.X_OK) else 0o444)
    for directory in sorted((path for path in given.rglob("*") if path.is_dir()), reverse=True):
        directory.chmod(0o555)
    given.chmod(0o555)


def _feed(process: subprocess.Popen[bytes], data: bytes) -> None:
    """data on the command's stdin, then EOF: small enough for the pipe's buffer, so this
    never waits on the command."""
    if len(data) > _STDIN_BYTES:  # more could fill the pipe, and this would wait on it
        raise ValueError(f"{len(data)} bytes for a command's stdin: at most {_STDIN_BYTES}")
    assert process.stdin is not None  # started with stdin=PIPE
    with contextlib.suppress(BrokenPipeError):  # it is gone already: its end says why
        process.stdin.write(data)
    with contextlib.suppress(BrokenPipeError):
        process.stdin.close()


def _listener_channel() -> tuple[socket.socket, socket.socket]:
    """A socket pair the command's process sends its seccomp listener back on (before
    exec: the command itself must never hold it)."""
    import socket

    return socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)


def _close_channel(channel: tuple[socket.socket, socket.socket] | None) -> None:
    for end in channel or ():
        end.close()


def _supervisor(
    channel: tuple[socket.socket, socket.socket] | None, own: tuple[str, ...]
) -> Supervisor | None:
    """The supervisor of the command just started, with the listener it sent."""
    if channel is None:
        return None
    import socket

    from verifier.judges.supervisor import Supervisor

    ours, theirs = channel
    theirs.close()
    try:
        _, descriptors, _, _ = socket.recv_fds(ours, 1, 1)
    finally:
        ours.close()
    return Supervisor(descriptors[0], own)


def _supervision_installer() -> Callable[[], int]:
    """What installs the supervisor's filter in the command's process, returning its
    listener: made before the fork, so that the child imports nothing."""
    from verifier.judges.supervisor import install_seccomp, supervised_program

    return functools.partial(install_seccomp, supervised_program(), listener=True)


def _confine(
    policy: SandboxPolicy,
    writable: tuple[str, ...],
    readable: tuple[str, ...],
    channel: tuple[socket.socket, socket.socket] | None,
    listen: Callable[[], int] | None,
) -> None:
    """In the command's process, before exec (already as the sandbox user when root): no
    privileges to gain, death with its judge, first in line for the OOM killer, a
    ceiling on its processes, Landlock
    (reads beneath `readable` and its own dirs, writes beneath its own dirs; no signals
    out of its domain), and the supervisor's filter, whose listener goes back to the
    judge's process (`listen`, which installs it)."""
    forbid_new_privileges()
    die_with_parent()
    adjust = "/proc/self/oom_score_adj"  # the OOM killer takes the command before the grader
    with contextlib.suppress(OSError), open(adjust, "w", encoding="ascii") as handle:
        handle.write("1000")
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    limit = policy.processes if hard == resource.RLIM_INFINITY else min(hard, policy.processes)
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    if policy.landlock:
        confine_with_landlock(policy.landlock, writable, readable=readable)
    if channel is not None and listen is not None:
        import socket

        listener = listen()
        socket.send_fds(channel[1], [b"L"], [listener])
        os.close(listener)


def _stream(
    process: subprocess.Popen[bytes],
    tails: Mapping[int, _Tail],
    timeout: float,
    supervisor: Supervisor | None = None,
    space: Callable[[], str | None] | None = None,
) -> tuple[bool, str | None]:
    """Read the command's output pipes into their tails, and answer its supervised
    calls, until it exits ((False, None)) or its time is up ((True, None)); every
    _SPACE_CHECK_S ask `space` whether it must stop for what it wrote (then it is
    killed: (False, why)).

    Reading stops when the command exits, not at the end of its output: what it left
    in the background may hold the pipe open for ever.
    """
    import selectors

    deadline = time.monotonic() + timeout
    next_check = time.monotonic() + _SPACE_CHECK_S
    with selectors.DefaultSelector() as selector:
        for fd in tails:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        if supervisor is not None:
            selector.register(supervisor.fileno(), selectors.EVENT_READ)
        while process.poll() is None:
            now = time.monotonic()
            if now >= deadline:
                return True, None
            if space is not None and now >= next_check:
                next_check = now + _SPACE_CHECK_S
                stopped = space()
                if stopped is not None:
                    kill_trees([process.pid])
                    process.wait()
                    return False, stopped
            for key, _ in selector.select(timeout=min(deadline - now, _SPACE_CHECK_S)):
                if supervisor is not None and key.fd == supervisor.fileno():
                    supervisor.serve()
                else:
                    tails[key.fd].read(key.fd, limit=_DRAIN_BYTES)
    for fd, tail in tails.items():
        tail.read(fd, limit=_DRAIN_BYTES)
    return False, None


def _filling_the_temp_space(policy: SandboxPolicy, scratch: Path) -> str | None:
    """Why the command must stop now, if it must: the temp filesystem (where every
    command's copy and HOME are, and on a tmpfs the memory the cgroup may use) is at its
    margin, and this command's dirs hold at least its share of what is used there (so
    that the one filling it is stopped, not the commands beside it)."""
    from verifier.judges.workcopy import allocated_bytes, free_bytes

    if free_bytes(str(scratch)) >= 0:
        return None
    info = os.statvfs(scratch)
    used = (info.f_blocks - info.f_bfree) * info.f_frsize
    own = allocated_bytes(str(scratch))
    if own < used // max(policy.side_by_side, 1):
        return None
    return (
        f"\nstopped: the command filled the temp space ({own} bytes in its copy of the "
        "case and its HOME)"
    )


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

    def note(self, text: str) -> None:
        """End the tail with what the sandbox says about the run."""
        self.chunks.append(text.encode())
        self.kept += len(text)

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")

    def head_text(self) -> str:
        """The start of the stream up to where the tail begins, when the tail lost it."""
        return self.head[: self.cut].decode("utf-8", errors="replace")


def describe_confinement(policy: SandboxPolicy) -> str:
    """How commands are confined, for the judge's details (judges.json `sandbox`)."""
    who = f"UID {policy.uid}" if policy.as_root else "the grader's UID"
    parts = [f"{who}, in a private copy of the case"]
    if policy.hidden_by == "Landlock":
        scope = ", no signals out" if policy.landlock >= 6 else ""
        parts.append(
            f"Landlock ABI {policy.landlock}: the grader's files hidden, writes to "
            f"its dirs only{scope}"
        )
    elif policy.hidden_by is not None:
        parts.append("no Landlock in this kernel: the grader's files hidden by their modes")
    else:
        accepted = "accepted (--weak-sandbox)" if policy.accept_weak else "refused"
        parts.append(f"WEAK sandbox {accepted}: {policy.weakness}")
    if policy.supervised:
        parts.append("chmod, chown, ACLs and truncate only beneath its dirs")
    return "; ".join(parts)
