"""The confinement step, in the command's process between fork and exec (already as
the sandbox user when the grader is root): no privileges to gain (but inside its own
user namespace, for a command that runs as root there), death with its judge,
first in line for the OOM killer, a ceiling on its processes, Landlock (reads beneath
the plan's readable paths and its own dirs, writes beneath its own dirs; no signals
out of its domain), and the supervisor's seccomp filter, whose listener goes back to
the judge's process over a socket pair so that the command itself never holds it; then,
for a command that asks for one, the entrypoint started before it."""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import select  # here, not where it is used: a confined process may not read modules
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from verifier.linux import die_with_parent
from verifier.sandbox.kernel import confine_with_landlock, forbid_new_privileges
from verifier.sandbox.plan import CommandPlan
from verifier.sandbox.views import enter_views

if TYPE_CHECKING:
    from verifier.sandbox.idmap import Mapper
    from verifier.sandbox.supervisor import Supervisor


class SupervisionHandover:
    """How the supervisor's listener travels from the command's process (which installs
    the filter before exec) to the judge's: a socket pair, and the installer, made
    before the fork so that the child imports nothing."""

    def __init__(self, signals: bool) -> None:
        import functools
        import socket

        from verifier.sandbox.supervisor import install_seccomp, supervised_program

        self.signals = signals
        self._ours, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._install: Callable[[], int] = functools.partial(
            install_seccomp, supervised_program(signals), listener=True
        )

    def send_listener(self) -> None:
        """In the command's process: install the filter, send its listener back."""
        import socket

        listener = self._install()
        socket.send_fds(self._theirs, [b"L"], [listener])
        os.close(listener)

    def supervisor(
        self,
        own_dirs: tuple[str, ...],
        session: int,
        root_inside: bool = False,
        view_targets: tuple[str, ...] = (),
    ) -> Supervisor:
        """In the judge's process, once the command started (`session`: its pid, the
        leader of the session it started): its supervisor (`root_inside`: the command
        is root of its own user namespace; `view_targets`: where its writable views
        are mounted)."""
        import socket

        from verifier.sandbox.supervisor import Supervisor

        self._theirs.close()
        try:
            _, descriptors, _, _ = socket.recv_fds(self._ours, 1, 1)
        finally:
            self._ours.close()
        return Supervisor(
            descriptors[0], own_dirs, session, self.signals, root_inside, view_targets
        )

    def close(self) -> None:
        for end in (self._ours, self._theirs):
            end.close()


def confine(
    plan: CommandPlan, handover: SupervisionHandover | None, mapper: Mapper | None = None
) -> None:
    """Before exec, in the command's process (subprocess's preexec_fn)."""
    # Its views are mounted before Landlock restricts it (a restricted process may not
    # mount), after the rules hold their dirs (a view at /tmp may cover where they are).
    as_root = plan.idmap is not None and bool(plan.mounts)
    views = (
        functools.partial(enter_views, plan.mounts, plan.start, as_root, mapper, plan.results)
        if plan.mounts
        else None
    )
    # Root of its own user namespace (verifier.sandbox.idmap), it may run the image's
    # setuid programs: real root is not mapped there, so a setuid bit gives at most an
    # ID of its namespace, which it could switch to anyway. Landlock and the seccomp
    # filter still install (it has CAP_SYS_ADMIN in its namespace: the kernel's other
    # condition for them), and stay across every exec.
    if not as_root:
        forbid_new_privileges()
    die_with_parent()
    adjust = "/proc/self/oom_score_adj"  # the OOM killer takes the command before the grader
    with contextlib.suppress(OSError), open(adjust, "w", encoding="ascii") as handle:
        handle.write("1000")
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    limit = plan.processes if hard == resource.RLIM_INFINITY else min(hard, plan.processes)
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    if plan.landlock:
        confine_with_landlock(
            plan.landlock, plan.writable, readable=plan.readable, before_restricting=views
        )
    elif views is not None:
        views()
    if handover is not None:
        handover.send_listener()
    if plan.entrypoint and plan.mounts:
        start_entrypoint(plan.entrypoint, plan.environment, plan.entrypoint_wait)


# The command the entrypoint is handed, as Harbor hands `sh -c 'sleep infinity'` to the
# agent's container, saying first that the entrypoint got as far as running it.
_READY_FD = 9
ENTRYPOINT_COMMAND = ("sh", "-c", f"echo ready >&{_READY_FD}; exec sleep infinity {_READY_FD}>&-")
_POLL_S = 0.05
ENTRYPOINT_SETTLE_S = 1.0  # then, for what it started in the background to be up


def start_entrypoint(argv: tuple[str, ...], environment: Mapping[str, str], wait: float) -> None:
    """In the command's process, confined, as PID 1 of its namespace: the image's
    entrypoint `argv` started in the background with ENTRYPOINT_COMMAND, then a wait
    until that command runs (the entrypoint set up what it sets up, and `exec "$@"`),
    the entrypoint ends, or `wait` seconds pass. What it leaves running is killed with
    the namespace when the command ends."""
    ready, ready_write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's outcome is what it runs
        try:
            os.close(ready)
            os.dup2(ready_write, _READY_FD)
            os.closerange(3, _READY_FD)
            os.closerange(_READY_FD + 1, os.sysconf("SC_OPEN_MAX"))
            # the image's ENTRYPOINT, as the engine starts it: no shell of ours around it
            os.execvpe(argv[0], [*argv, *ENTRYPOINT_COMMAND], dict(environment))  # noqa: S606
        finally:
            os._exit(127)
    os.close(ready_write)
    deadline = time.monotonic() + wait
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([ready], [], [], min(left, _POLL_S))
        if readable:
            break
        done, _ = os.waitpid(child, os.WNOHANG)
        if done:
            break
    else:
        os.close(ready)
        return
    os.close(ready)
    time.sleep(max(0.0, min(ENTRYPOINT_SETTLE_S, deadline - time.monotonic())))
