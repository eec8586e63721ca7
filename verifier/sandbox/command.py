"""`Sandbox.run`: one command from the case, in its own copy of the case, confined
under the policy of the grade, and how it ended.

The command gets an environment built from an allow-list, a HOME and TMPDIR of its
own, no stdin (unless the caller hands it bytes to read), its own session, no way to
gain privileges, and its own private copy of the case, so that its writes reach no
other judge. Trusted files reach it only when the caller hands them over (`provided`:
read-only, named by $VERIFIER_PROVIDED), and it hands files back only through
$VERIFIER_RESULTS (`returned`: read back as bounded facts like any case file): the
trusted test runners write their reports there. Everything it starts is killed before
its judge answers.

subprocess and tempfile are imported where a command runs, in the judge's process:
every batch worker imports this module, and each extension library a worker has
loaded makes every judge's fork and exit dearer.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any, BinaryIO, Protocol

import attrs

from verifier.casefiles import CaseFile, read_case_file, resolve_inside
from verifier.linux import kill_trees
from verifier.sandbox.capture import (
    STDOUT_BYTES,
    TAIL_BYTES,
    OutputTail,
    filling_the_temp_space,
    stream,
)
from verifier.sandbox.dirs import CommandDirs, command_dirs, provided_names
from verifier.sandbox.idmap import IdMap, Mapper, id_range
from verifier.sandbox.plan import CommandPlan, plan_command
from verifier.sandbox.policy import SandboxPolicy
from verifier.sandbox.views import (
    View,
    root_views,
    setuid_mounts,
    view_mounts,
    views_refused,
)

RETURNED_BYTES = 64 * 1024 * 1024  # of each file a command hands back in $VERIFIER_RESULTS
_NOT_REWRITTEN = "its writer may not have rewritten what was there, so it is not read"
_STDIN_BYTES = 64 * 1024 * 1024  # what a command may be handed on stdin


def _argv(command: str | Sequence[str]) -> str | tuple[str, ...]:
    return command if isinstance(command, str) else tuple(command)


@attrs.frozen
class Command:
    """What to run and what it is handed.

    `argv`: a shell string or an argv list; `cwd`: a dir inside the case to start in
    (one that leads out of the case is refused); `env`: the author's variables over the
    allow-list; `provided`: trusted files (relative name -> file) copied read-only into
    the dir $VERIFIER_PROVIDED names; `returned`: the names of the files it may leave in
    $VERIFIER_RESULTS, read back (RETURNED_BYTES each) into CommandRun.returned; `stdin`:
    bytes it reads on its stdin, then EOF (a secret for a trusted helper to read before
    any code of the case runs: from a file without a name, which only the command's
    stdin holds), instead of no stdin at all; `separate_stdout`: keep
    stdout apart (its last `stdout_bytes`) for judges that compare what it prints;
    `views`: its dirs shown at the paths it expects, in a mount namespace of its own
    (verifier.sandbox.views), `start_at` the view path it starts in (with views, `cwd`
    is not used); `home_from`: a dir of the image its HOME starts as a copy of;
    `as_root` (with views): it runs as root of its own user namespace
    (verifier.sandbox.idmap), with private copies of the image's dirs root's tests
    write (views.root_views); `entrypoint` (with views): a program started in its
    namespaces before it (a task image's ENTRYPOINT, with `sh -c 'sleep infinity'` as
    its command, as Harbor starts the agent's container), the command starting once
    that command runs, or it ended, or `entrypoint_wait` seconds passed; `setuid` (with
    `as_root`): the image's setuid-root programs, shown as copies owned by root of its
    namespace, so that the users it switches to run them as root there."""

    argv: str | tuple[str, ...] = attrs.field(converter=_argv)
    timeout: float
    cwd: str = ""
    env: Mapping[str, str] = MappingProxyType({})
    provided: Mapping[str, Path] = MappingProxyType({})
    returned: tuple[str, ...] = ()
    stdin: bytes | None = attrs.field(default=None, repr=False)
    separate_stdout: bool = False
    stdout_bytes: int = STDOUT_BYTES
    views: tuple[View, ...] = ()
    start_at: str = ""
    home_from: Path | None = None
    as_root: bool = False
    entrypoint: tuple[str, ...] = ()
    entrypoint_wait: float = 30.0
    setuid: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.stdin is not None and len(self.stdin) > _STDIN_BYTES:
            # more could fill the pipe, and the judge would wait on the command
            raise ValueError(
                f"{len(self.stdin)} bytes for a command's stdin: at most {_STDIN_BYTES}"
            )


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
    collected: Any = None  # what the probe's `after` returned
    start_error: str | None = None  # why it could not be executed (exec failed), else None
    # each file of `returned`: its bytes, or the fact that it is missing or unusable
    returned: Mapping[str, CaseFile] = MappingProxyType({})
    head: str = ""  # the first HEAD_BYTES of the output, when the tail does not begin there

    @classmethod
    def not_run(cls, problem: str, confinement: str, start_error: str | None = None) -> CommandRun:
        return cls(None, None, False, problem, 0, confinement, start_error=start_error)


class WorkdirProbe(Protocol):
    """Looks at the dir the command ran in (its private copy of the case), before it
    starts and after it and everything it started are gone."""

    def before(self, workdir: Path) -> None: ...

    def after(self, workdir: Path) -> Any: ...


@attrs.frozen
class Sandbox:
    """Where commands from the case run: the policy of the grade (or of this batch
    worker's slot and this judge's lane), handed to the judges that run commands."""

    policy: SandboxPolicy

    def in_slot(self, slot: int) -> Sandbox:
        return Sandbox(self.policy.in_slot(slot))

    def in_lane(self, lane: int) -> Sandbox:
        return Sandbox(self.policy.in_lane(lane))

    def run(
        self, command: Command, case_dir: Path, probe: WorkdirProbe | None = None
    ) -> CommandRun:
        """Run `command` in its own copy of `case_dir`; `probe` sees the copy before and
        after the run (what the command wrote exists only there, e.g. a test report).
        OSError when a provided file cannot be read (the author's fault, not the case's)."""
        from verifier.sandbox.case_copy import CaseCopyError, copy_case

        policy = self.policy
        confinement = policy.describe()
        if policy.refused:
            return CommandRun.not_run(
                f"refused to run: the sandbox is weak here ({policy.weakness})", confinement
            )
        uid = policy.uid if policy.as_root else None
        provided = provided_names(command.provided)
        problem = _views_problem(command, uid) if command.views else None
        if problem is not None:
            return CommandRun.not_run(problem, confinement, start_error=problem)
        views = _with_root_views(command)
        idmap = _idmap(command, policy) if command.views else None
        if idmap is not None:
            confinement += f"; {idmap.describe()}"
        tmp = any(view.of == "tmp" for view in views)
        copies = tuple(view.at for view in views if view.of == "image")
        with command_dirs(
            policy.scratch, uid, provided, bool(command.returned), tmp, copies
        ) as dirs:
            try:
                copy_case(str(case_dir), str(dirs.case), uid, policy.hidden_ids)
            except (OSError, CaseCopyError) as error:
                return CommandRun.not_run(
                    f"the case cannot be copied for the command: {error}", confinement
                )
            try:
                copy_image_dirs(dirs, views, uid, policy.hidden_ids)
            except (OSError, CaseCopyError) as error:  # the image's: not the case's
                problem = f"the image's dirs cannot be copied for it: {error}"
                return CommandRun.not_run(problem, confinement, start_error=problem)
            if command.home_from is not None:
                try:
                    dirs.home.rmdir()
                    copy_case(str(command.home_from), str(dirs.home), uid, policy.hidden_ids)
                except (OSError, CaseCopyError) as error:  # the image's: not the case's
                    problem = f"its HOME cannot be made from {command.home_from}: {error}"
                    return CommandRun.not_run(problem, confinement, start_error=problem)
            start, outside = (
                resolve_inside(dirs.case, command.cwd)
                if command.cwd and not command.views
                else (dirs.case, None)
            )
            if start is None or not start.is_dir():
                problem = (
                    f"its working dir {command.cwd} {outside or 'is not a directory in the case'}"
                )
                return CommandRun.not_run(problem, confinement)
            mounts = view_mounts(views, dirs)
            if command.as_root and command.views and command.setuid:
                shown = [view.at for view in views if view.of != "image"]
                programs = copy_setuid_programs(
                    dirs,
                    [p for p in command.setuid if not any(_beneath(p, at) for at in shown)],
                    uid,
                )
                mounts = (*mounts, *setuid_mounts(programs, dirs))
            plan = plan_command(
                policy, dirs, command.env, os.environ, mounts, command.start_at or str(start)
            )
            if command.views:
                plan = attrs.evolve(
                    plan,
                    idmap=idmap,
                    entrypoint=command.entrypoint,
                    entrypoint_wait=command.entrypoint_wait,
                    results=str(dirs.results) if command.returned else "",
                )
            if probe is not None:
                probe.before(dirs.case)
            run = _execute(command, plan, start, dirs, policy.side_by_side, confinement)
            if run.start_error is not None:
                return run
            collected = probe.after(dirs.case) if probe is not None else None
            owner = os.getuid() if uid is None else uid
            returned = {
                name: _handed_back(dirs.results, name, owner)
                if command.views  # a script, whose later writes must win
                else read_case_file(dirs.results, name, RETURNED_BYTES)
                for name in command.returned
            }
        return attrs.evolve(run, collected=collected, returned=returned)


def _handed_back(results: Path, name: str, uid: int) -> CaseFile:
    """A file a command with views (a task's test script) hands back, read as a case
    file; unless it ended as one its writer (running as `uid`) could no longer rewrite:
    a symlink, or not its own and writable to it, or in a dir it cannot enter. The code
    under test the script runs keeps a reward of its own from being overwritten so (as
    root, the command owns its files; the grader reading them would not notice)."""
    parts = PurePosixPath(name).parts
    directories = [results.joinpath(*parts[:depth]) for depth in range(len(parts))]
    if not all(_its_own(directory, uid, stat.S_IXUSR) for directory in directories):
        return CaseFile(None, f"is in a dir closed to its writer: {_NOT_REWRITTEN}")
    try:
        info = os.lstat(results / name)
    except OSError:  # missing, or beneath a file: read_case_file says so
        return read_case_file(results, name, RETURNED_BYTES)
    if stat.S_ISLNK(info.st_mode):
        return CaseFile(None, f"is a symlink: {_NOT_REWRITTEN}")
    if stat.S_ISREG(info.st_mode) and not _its_own(results / name, uid, stat.S_IWUSR):
        return CaseFile(None, f"was made read-only to its writer: {_NOT_REWRITTEN}")
    return read_case_file(results, name, RETURNED_BYTES)


def _its_own(path: Path, uid: int, permission: int) -> bool:
    """Whether `uid` owns `path` with `permission` (or it is missing: nothing to say)."""
    try:
        info = os.lstat(path)
    except OSError:
        return True
    return info.st_uid == uid and bool(info.st_mode & permission)


def _with_root_views(command: Command) -> tuple[View, ...]:
    """The command's views, and a root command's copies of the image's dirs (those it
    does not show another dir at)."""
    if not (command.as_root and command.views):
        return command.views
    own = {view.at for view in command.views}
    return (*command.views, *(view for view in root_views() if view.at not in own))


def _idmap(command: Command, policy: SandboxPolicy) -> IdMap | None:
    """Who a command with views is inside its user namespace: None, its own UID; else
    root, with a range of IDs of its own beside when the grader is root and the
    container maps them (verifier.sandbox.idmap)."""
    if not command.as_root:
        return None
    uid = policy.uid if policy.as_root else os.getuid()
    gid = uid if policy.as_root else os.getgid()
    return IdMap(uid, gid, id_range(uid) if policy.as_root else None)


def copy_image_dirs(
    dirs: CommandDirs,
    views: Sequence[View],
    uid: int | None,
    hidden_ids: frozenset[tuple[int, int]],
) -> None:
    """The command's private copies of the image's dirs (its `image` views), owned by
    `uid` (what the grader cannot read, or hides, left out), with the image's password
    hashes locked, and a dir at each other view's path inside a copy (to mount it on)."""
    from verifier.sandbox.case_copy import copy_case

    for at in dirs.copies:
        target = dirs.copy_of(at)
        target.parent.mkdir(mode=0o711, parents=True, exist_ok=True)
        copy_case(at, str(target), uid, hidden_ids, skip_unreadable=True)
        if at == "/etc":
            lock_passwords(target)
    for view in views:
        inside = next((at for at in dirs.copies if _strictly_beneath(view.at, at)), None)
        if inside is None:
            continue
        place = dirs.copy_of(inside).joinpath(PurePosixPath(view.at).relative_to(inside))
        if not place.is_dir():
            if place.is_symlink() or place.exists():
                place.unlink()
            place.mkdir(parents=True, exist_ok=True)
            if uid is not None:
                os.chown(place, uid, uid)


def copy_setuid_programs(
    dirs: CommandDirs, programs: Sequence[str], uid: int | None
) -> tuple[str, ...]:
    """The command's copies of the image's setuid-root `programs` that still are (regular
    files, owned by root, setuid), owned by `uid` (root inside its namespace) with their
    setuid bit; the programs copied, in the order of their copies."""
    import shutil

    kept: list[str] = []
    for program in programs:
        try:
            info = os.lstat(program)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_uid != 0 or not info.st_mode & stat.S_ISUID:
            continue
        copy = dirs.setuid_copy(len(kept))
        copy.parent.mkdir(mode=0o711, exist_ok=True)
        try:
            shutil.copyfile(program, copy)
        except OSError:  # one the grader cannot read: left as it is
            continue
        if uid is not None:
            os.chown(copy, uid, uid)
        os.chmod(copy, stat.S_IMODE(info.st_mode) & 0o4755)
        kept.append(program)
    return tuple(kept)


def _beneath(path: str, place: str) -> bool:
    return path == place or _strictly_beneath(path, place)


def _strictly_beneath(path: str, place: str) -> bool:
    return path.startswith(place.rstrip("/") + "/")


def lock_passwords(etc: Path) -> None:
    """The password hashes of the image's shadow and gshadow copies replaced with `!`
    (locked): the script and the code under test read the copy."""
    for name in ("shadow", "gshadow", "shadow-", "gshadow-"):
        path = etc / name
        if path.is_symlink() or not path.is_file():
            continue
        lines = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            fields = line.split(":")
            if len(fields) > 1 and fields[1] not in ("", "*", "!", "!!", "x"):
                fields[1] = "!"
            lines.append(":".join(fields))
        path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def _views_problem(command: Command, uid: int | None) -> str | None:
    """Why the command cannot have its views here (nothing of the case's doing), or None."""
    for view in command.views:
        if not os.path.isdir(view.at):
            return f"its view {view.at} is not a directory of this image (nothing to show it at)"
    return views_refused(uid)


def _execute(
    command: Command,
    plan: CommandPlan,
    start: Path,
    dirs: CommandDirs,
    side_by_side: int,
    confinement: str,
) -> CommandRun:
    """Start the command confined by `plan`, stream its output until it ends or its time
    is up, and kill everything it started. RuntimeError when it could not be confined
    (nothing of the case's doing: no verdict)."""
    import functools
    import subprocess

    from verifier.sandbox.confine import SupervisionHandover, confine

    handover = SupervisionHandover(plan.signals_supervised) if plan.supervised else None
    idmap = plan.idmap
    mapper = Mapper(idmap) if idmap is not None and idmap.base is not None else None
    stdin = _stdin_file(command.stdin, dirs.root) if command.stdin is not None else None
    try:
        process = subprocess.Popen(
            command.argv if isinstance(command.argv, str) else list(command.argv),
            shell=isinstance(command.argv, str),
            cwd=start,
            env=dict(plan.environment),
            stdin=subprocess.DEVNULL if stdin is None else stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if command.separate_stdout else subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            user=plan.uid,
            group=plan.uid,
            extra_groups=[] if plan.uid is not None else None,
            # Between fork and exec, in a judge's own process, which runs no threads.
            preexec_fn=functools.partial(confine, plan, handover, mapper),  # noqa: PLW1509
        )
    except OSError as error:  # exec failed: the program is missing, or not executable
        if handover is not None:
            handover.close()
        return CommandRun.not_run(f"could not start: {error}", confinement, start_error=str(error))
    except subprocess.SubprocessError as error:  # confine failed: nothing of the case's
        if handover is not None:
            handover.close()
        raise RuntimeError(
            f"the command could not be confined ({error}): no verdict on the case"
        ) from None
    finally:
        if mapper is not None:
            mapper.close()
        if stdin is not None:  # the command holds its own copy: none is left here
            stdin.close()
    root_inside = plan.idmap is not None
    supervisor = (
        handover.supervisor(
            plan.writable,
            process.pid,
            root_inside,
            tuple(mount.target for mount in plan.mounts if not mount.read_only),
        )
        if handover
        else None
    )
    output = OutputTail(TAIL_BYTES)
    stdout = OutputTail(command.stdout_bytes) if command.separate_stdout else output
    tails = {process.stdout.fileno(): stdout}  # type: ignore[union-attr]
    if process.stderr is not None:
        tails[process.stderr.fileno()] = output
    space = functools.partial(filling_the_temp_space, dirs.root, side_by_side)
    try:
        timed_out, stopped = stream(process, tails, command.timeout, supervisor, space)
        if stopped is not None:
            output.note(stopped)
    finally:
        kill_trees([process.pid])
        process.wait()
        if supervisor is not None:
            supervisor.close()
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
        stdout=stdout.text() if command.separate_stdout else None,
        stdout_cut_bytes=stdout.cut if command.separate_stdout else 0,
    )


def _stdin_file(data: bytes, directory: Path) -> BinaryIO:
    """data in a file without a name (unlinked as it is made, in the command's own dir),
    read from its start: the command's stdin, which no path reaches and nothing waits
    on however much it holds. Once the command has read it to its end and closed it
    (the pytest launcher: before any code of the case runs), nothing holds it."""
    import tempfile

    handle = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 (the caller closes it)
    handle.write(data)
    handle.seek(0)
    return handle
