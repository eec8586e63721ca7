"""What commands from the case may reach in one grade or batch: planned once, before any
judge forks, then only handed on (a batch worker's and a judge's copies differ only in
which UID their commands run as).

What the grader keeps is hidden from every command: the grading config's dir, the out
dir, the agent's logs, the grader's scratch and every other command's copy, in a batch
the cases and their out dirs, and the usual secret mounts. Landlock hides them (reads,
writes and runs are allowed only beneath the rest of the file system and the command's
own dirs), or, where the kernel has no Landlock and the grader is root, the file modes
do (the command then runs as an unprivileged UID that cannot enter them). When neither
holds the policy is *weak*, and a grade that runs code from the case stops before
grading unless the user accepted that (`--weak-sandbox`).

As root every command runs as an unprivileged UID (65534 unless $VERIFIER_SANDBOX_UID
says otherwise), one per (slot, lane): a batch's workers are its slots, the judges of a
case running side by side its lanes, so that no command can reach another's copy or
use up its processes. As any other UID a command runs as the grader's, and what
Landlock does not govern (chmod and its family) goes through a seccomp supervisor.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import stat
from collections.abc import Collection, Iterable

import attrs

from verifier.errors import OutOfProcessesError
from verifier.processes import forbid_new_privileges, landlock_abi
from verifier.system import cgroup_pids_max

SANDBOX_UID_ENV = "VERIFIER_SANDBOX_UID"
DEFAULT_SANDBOX_UID = 65534  # nobody; a batch's other workers count down from it
SECRET_MOUNTS = ("/run/secrets", "/var/run/secrets")  # Docker's, Kubernetes' tokens
# What the agent left beside the case: Harbor re-creates the agent's /logs/artifacts in a
# separate verifier's container, so a module planted there would pass for an installed one.
AGENT_DIRS = ("/logs/artifacts",)
MAX_PROCESSES = 4096  # a command's ceiling (per UID): a fork bomb's
_SWITCH_USER_CAPABILITIES = (0, 6, 7)  # CAP_CHOWN, CAP_SETGID, CAP_SETUID
_PROCESS_RESERVE = 128  # processes the grader keeps for itself below a finite limit


@attrs.frozen
class SandboxPolicy:
    """How commands are confined for one grade or batch.

    `hidden`: the grader's paths a command must not read; `readable`: what it may read
    instead (Landlock rules: every sibling on the way from / down to each hidden path;
    the ancestors themselves are then not listable); `scratch`: the dir beneath which
    every command's copy and HOME are made (hidden itself). `hidden_by` says what keeps
    the hidden paths out of reach ("Landlock", "file modes"); `weakness`, when nothing
    does, why (then `accept_weak` says whether the user took that). `slot` and `lane`
    say which of the `slots` x `lanes` commands that may run side by side this copy of
    the policy runs (as root each has a UID of its own: `uid`)."""

    hidden: tuple[str, ...]
    hidden_ids: frozenset[tuple[int, int]]  # their (st_dev, st_ino): left out of copies
    readable: tuple[str, ...]
    scratch: str
    landlock: int  # the ABI (0: none)
    as_root: bool  # commands run as another UID
    base_uid: int  # as root, slot 0's lane 0's UID; otherwise the grader's
    slots: int
    lanes: int
    processes: int  # each command's RLIMIT_NPROC
    supervised: bool  # chmod and the rest go through the supervisor
    hidden_by: str | None
    weakness: str | None
    accept_weak: bool = False
    slot: int = 0
    lane: int = 0

    @property
    def refused(self) -> bool:
        return self.weakness is not None and not self.accept_weak

    @property
    def signals_supervised(self) -> bool:
        """Whether a command's signals go through the supervisor: it runs as the grader's
        UID, and Landlock cannot scope its signals (ABI < 6)."""
        return self.supervised and self.landlock < 6

    @property
    def side_by_side(self) -> int:
        """How many commands may run at once, each with its share of the temp space."""
        return self.slots * self.lanes

    @property
    def uid(self) -> int:
        """The UID this copy's commands run as."""
        if not self.as_root:
            return self.base_uid
        return self.base_uid - self.slot * self.lanes - self.lane

    def in_slot(self, slot: int) -> SandboxPolicy:
        """This policy for a batch worker: its cases' commands run as the slot's UIDs.
        ValueError for a slot it was not planned for (as root its UIDs would be another
        slot's, or below the range)."""
        if not 0 <= slot < self.slots:
            raise ValueError(f"slot {slot} of a sandbox planned for {self.slots}")
        return attrs.evolve(self, slot=slot, lane=0)

    def in_lane(self, lane: int) -> SandboxPolicy:
        """This policy for a judge's process: its commands run as its lane's UID."""
        return attrs.evolve(self, lane=min(lane, self.lanes - 1))

    def describe(self) -> str:
        """How commands are confined, for the judge's details (judges.json `sandbox`)."""
        who = f"UID {self.uid}" if self.as_root else "the grader's UID"
        parts = [f"{who}, in a private copy of the case"]
        if self.hidden_by == "Landlock":
            scope = ", no signals out" if self.landlock >= 6 else ""
            parts.append(
                f"Landlock ABI {self.landlock}: the grader's files hidden, writes to "
                f"its dirs only{scope}"
            )
        elif self.hidden_by is not None:
            parts.append("no Landlock in this kernel: the grader's files hidden by their modes")
        else:
            accepted = "accepted (--weak-sandbox)" if self.accept_weak else "refused"
            parts.append(f"WEAK sandbox {accepted}: {self.weakness}")
        if self.supervised:
            parts.append(
                "chmod, chown, ACLs and truncate only beneath its dirs, limits and "
                "scheduling of its own processes only"
            )
        if self.signals_supervised:
            parts.append("signals only to its own processes")
        return "; ".join(parts)


def plan_policy(
    hidden: Iterable[str | os.PathLike[str]] = (),
    *,
    case_dirs: Iterable[str | os.PathLike[str]] = (),
    accept_weak: bool = False,
    slots: int = 1,
    lanes: int = 1,
    scratch_root: str | None = None,
) -> SandboxPolicy:
    """The policy for commands that must not read `hidden` (nor SECRET_MOUNTS) nor,
    where Landlock can hide them, `case_dirs` (the original of the case a command gets a
    private copy of) and AGENT_DIRS (without Landlock their own modes decide, as nothing
    of the grader's is in them); it makes the scratch dir (remove it with
    `discard_policy`; OSError when it cannot).

    `slots`: how many cases run side by side (a batch's workers); `lanes`: how many
    judges of a case. ValueError when $VERIFIER_SANDBOX_UID leaves no UID for one."""
    as_root = can_switch_user()
    base = sandbox_uid() if as_root else os.geteuid()
    count = slots * lanes
    if as_root and base - count + 1 < 1:
        raise ValueError(
            f"${SANDBOX_UID_ENV} {base}: {slots} workers of {lanes} judges "
            f"need the UIDs {base - count + 1}..{base}, all above 0"
        )
    scratch = _make_scratch(scratch_root, as_root)
    cases = {_resolved(path) for path in (*case_dirs, *AGENT_DIRS)}
    paths = {_resolved(path) for path in (*hidden, *SECRET_MOUNTS)} | cases
    paths.add(os.path.dirname(scratch))  # every grader's scratch, of this UID
    present = [path for path in paths if path is not None and os.path.lexists(path)]
    existing = _outermost(present)
    abi = landlock_abi()
    uids = [base - index for index in range(count)] if as_root else [base]
    others = [path for path in existing if path != os.path.dirname(scratch) and path not in cases]
    hidden_by, weakness = _strength(others, abi, as_root, uids)
    supervised = not as_root and abi > 0 and _supervision_works()
    if not as_root and abi > 0 and not supervised and weakness is None:
        weakness = (
            "seccomp user notification is not available here, so a command "
            "could chmod what the grader owns"
        )
    return SandboxPolicy(
        hidden=existing,
        # every one, not only the outermost: the out dir inside the case is left out of
        # the copy, though the case hides it
        hidden_ids=frozenset(filter(None, map(_identity, present))),
        readable=tuple(readable_around(existing)),
        scratch=scratch,
        landlock=abi,
        as_root=as_root,
        base_uid=base,
        slots=slots,
        lanes=lanes,
        processes=process_ceiling(count, as_root),
        supervised=supervised,
        hidden_by=hidden_by,
        weakness=weakness,
        accept_weak=accept_weak,
    )


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


def parents(path: str) -> list[str]:
    """The absolute paths above path, nearest first, up to the root ("/")."""
    found = []
    while path not in ("", "/"):
        path = os.path.dirname(path)
        found.append(path)
    return found


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


@functools.cache
def _supervision_works() -> bool:
    """Whether this kernel (and the container's seccomp profile) lets a command install
    the supervisor's filter: tried once, in a forked child (OutOfProcessesError when no
    child can be forked). Cached: a fact about the machine, not a decision."""
    from verifier.sandbox.supervisor import install_seccomp, supervised_program

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
