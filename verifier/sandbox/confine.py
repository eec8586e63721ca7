"""The confinement step, in the command's process between fork and exec (already as
the sandbox user when the grader is root): no privileges to gain, death with its judge,
first in line for the OOM killer, a ceiling on its processes, Landlock (reads beneath
the plan's readable paths and its own dirs, writes beneath its own dirs; no signals
out of its domain), and the supervisor's seccomp filter, whose listener goes back to
the judge's process over a socket pair so that the command itself never holds it."""

from __future__ import annotations

import contextlib
import functools
import os
import resource
from collections.abc import Callable
from typing import TYPE_CHECKING

from verifier.processes import confine_with_landlock, die_with_parent, forbid_new_privileges
from verifier.sandbox.plan import CommandPlan
from verifier.sandbox.views import enter_views

if TYPE_CHECKING:
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

    def supervisor(self, own_dirs: tuple[str, ...], session: int) -> Supervisor:
        """In the judge's process, once the command started (`session`: its pid, the
        leader of the session it started): its supervisor."""
        import socket

        from verifier.sandbox.supervisor import Supervisor

        self._theirs.close()
        try:
            _, descriptors, _, _ = socket.recv_fds(self._ours, 1, 1)
        finally:
            self._ours.close()
        return Supervisor(descriptors[0], own_dirs, session, self.signals)

    def close(self) -> None:
        for end in (self._ours, self._theirs):
            end.close()


def confine(plan: CommandPlan, handover: SupervisionHandover | None) -> None:
    """Before exec, in the command's process (subprocess's preexec_fn)."""
    # Its views are mounted before Landlock restricts it (a restricted process may not
    # mount), after the rules hold their dirs (a view at /tmp may cover where they are).
    views = functools.partial(enter_views, plan.mounts, plan.start) if plan.mounts else None
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
