"""A command's own view of the file system: its dirs at the paths it expects.

A Harbor task's test.sh was written for /tests (the task's tests), /app (the agent's
work), /logs/verifier (where it writes its reward) and /tmp. Those paths are the
grader's in the verifier's container (the case, the out dir) or shared; so a command
that asks for views gets a mount namespace of its own (kernel.own_mount_namespace:
inside a user namespace mapping only its own UID) where each view path shows one of
its own dirs: its private copy of the case, the dir it hands files back in, a private
/tmp, its HOME, or a dir of the trusted files it was handed (read-only). The mounts
are made in its process before Landlock (a Landlock domain may not mount), which then
confines it as any command: it writes only beneath its own dirs, whatever path it
reaches them by, and what is hidden stays hidden. It also runs as PID 1 of a PID
namespace of its own: when it ends, everything it left running is killed by the
kernel at once, before the files it hands back are read (a process left behind by
the code under test cannot rewrite them in the moment the end takes to be seen).

Where user namespaces are refused (docker's and Kubernetes' default seccomp profiles),
a command with views cannot run: `views_refused` says why before anything is staged.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

import attrs

from verifier.linux import libc
from verifier.sandbox.dirs import CommandDirs
from verifier.sandbox.kernel import bind_mount, own_mount_namespace, run_as_init

if TYPE_CHECKING:
    from verifier.sandbox.idmap import Mapper

OWN_DIRS = ("case", "results", "tmp", "home", "image")  # rw; `provided/<name>`: read-only
# What a test script run as root writes outside the case, the image's dirs it gets a
# private copy of (see `root_views`): users and groups, root's and the users' homes, the
# files of a service it starts.
ROOT_COPIES = ("/etc", "/home", "/run", "/var/log", "/var/spool", "/var/tmp", "/srv")  # noqa: S108


@attrs.frozen
class View:
    """`at`: the absolute path the command sees; `of`: what it shows there: `case` (its
    private copy of the case), `results` (the dir it hands files back in), `tmp` (an
    empty private dir), `home` (its HOME), or `provided/<name>` (a dir of the files it
    was handed, read-only)."""

    at: str
    of: str

    def __attrs_post_init__(self) -> None:
        path = PurePosixPath(self.at)
        if not path.is_absolute() or ".." in path.parts or len(path.parts) < 2:
            raise ValueError(f"view {self.at!r}: an absolute path below / (no '..')")
        if self.of not in OWN_DIRS and not self.of.startswith("provided/"):
            raise ValueError(f"view of {self.of!r}: one of {', '.join(OWN_DIRS)}, provided/NAME")


def root_views(present: Callable[[str], bool] = os.path.isdir) -> tuple[View, ...]:
    """The views of a command that runs as root of its own user namespace: a private
    copy of each of ROOT_COPIES the image has (where root's tests write: /etc/passwd
    for `useradd`, /home, a service's /run and /var/log), and its HOME at /root. The
    image's own files there stay as they are; real root owns them, and it is not
    mapped in the namespace, so the command could not write them anyway."""
    copies = tuple(View(at, "image") for at in ROOT_COPIES if present(at))
    return (*copies, View("/root", "home"))


@attrs.frozen
class Mount:
    source: str  # the backing dir (or file)
    target: str  # the view's path
    read_only: bool
    setuid: bool = False  # a setuid program's copy (`setuid_mounts`): its bit honoured


def view_mounts(views: Sequence[View], dirs: CommandDirs) -> tuple[Mount, ...]:
    """The bind mounts that make `views` from the command's `dirs`, outermost first (a
    view inside another is mounted over it)."""
    backing = {"case": dirs.case, "results": dirs.results, "tmp": dirs.tmp, "home": dirs.home}
    mounts = []
    for view in sorted(views, key=lambda view: len(PurePosixPath(view.at).parts)):
        if view.of == "image":
            mounts.append(Mount(str(dirs.copy_of(view.at)), view.at, read_only=False))
        elif view.of.startswith("provided/"):
            source = dirs.given / view.of.removeprefix("provided/")
            mounts.append(Mount(str(source), view.at, read_only=True))
        else:
            mounts.append(Mount(str(backing[view.of]), view.at, read_only=False))
    return tuple(mounts)


def setuid_mounts(programs: Sequence[str], dirs: CommandDirs) -> tuple[Mount, ...]:
    """Read-only mounts of each of the command's copies of the image's setuid-root
    `programs` (dirs.setuid_copy: owned by root of its user namespace, setuid) over
    the program, so that a user its tests switch to runs it as root there, as they
    ran it as root natively (real root, which owns the image's own, is not mapped)."""
    return tuple(
        Mount(str(dirs.setuid_copy(index)), program, read_only=True, setuid=True)
        for index, program in enumerate(programs)
    )


def enter_views(
    mounts: Sequence[Mount],
    start: str,
    as_root: bool = False,
    mapper: Mapper | None = None,
    results: str = "",
) -> None:
    """In the command's process, before Landlock: its own mount namespace (as root of its
    user namespace with `as_root`, its maps written by `mapper` when given), each view
    mounted, and its working dir `start` (a view path, or else a dir as it was). The
    backing dirs are held open first (in the new namespace: a bind mount's source must
    be one of its mounts): a view (/tmp) may cover the path they lie at.

    Root of its namespace, the command could change its mounts (where Landlock does not
    forbid it): unmount the view it writes its reward to, or mount another dir over it,
    so that its own write goes elsewhere and one the code under test left is read. So
    the mount table is kept as it is once the views are made, and when it changed by
    the end, `results` (the dir the command hands files back in) is emptied: nothing it
    hands back is read. No honest test changes its mounts (Harbor's containers forbid
    it too)."""
    own_mount_namespace(as_root, mapper)
    guard = os.open(results, os.O_RDONLY | os.O_DIRECTORY) if as_root and results else -1
    before = _mount_table() if guard >= 0 else {}
    flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
    sources = [
        os.open(mount.source, flags if not mount.setuid else os.O_PATH | os.O_CLOEXEC)
        for mount in mounts
    ]
    in_view = any(_beneath(start, mount.target) for mount in mounts)
    start_dir = None if in_view else os.open(start, flags)
    for source, mount in zip(sources, mounts, strict=True):
        bind_mount(
            f"/proc/self/fd/{source}",
            mount.target,
            read_only=mount.read_only,
            setuid=mount.setuid,
        )
        os.close(source)
    if start_dir is None:
        os.chdir(start)
    else:
        os.fchdir(start_dir)
        os.close(start_dir)
    if guard < 0:
        run_as_init()
        return
    made = _mount_table()
    run_as_init(guard, functools.partial(_empty_if_changed, before, made, guard))
    os.close(guard)  # in PID 1: the dir is the parent's alone


def _mount_table() -> dict[bytes, bytes]:
    """Each mount of this process's namespace by its ID: its parent, device, root, mount
    point and options (not its filesystem's options, which others may change)."""
    with open("/proc/self/mountinfo", "rb") as handle:
        return {
            fields[0]: b" ".join(fields[1:6])
            for fields in (line.split() for line in handle)
            if len(fields) > 5
        }


def _empty_if_changed(
    before: dict[bytes, bytes], made: dict[bytes, bytes], results: int
) -> None:  # pragma: no cover - the parent's
    """In the parent of the command's PID 1, once its namespace is empty: when its views
    (the mounts `made` has and `before` had not) are not all as they were made, or a
    mount was added, every file it hands back removed. (A mount the namespace had
    before its views may go: the host's unmounts can reach it, and the command cannot
    unmount one, as it came from a more privileged namespace.)"""
    try:
        now = _mount_table()
    except OSError:
        now = {}
    views = {key: value for key, value in made.items() if key not in before}
    added = now.keys() - made.keys()
    if not added and all(now.get(key) == value for key, value in views.items()):
        return
    for name in os.listdir(results):
        try:
            os.unlink(name, dir_fd=results)
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=results)


def _beneath(path: str, place: str) -> bool:
    return path == place or path.startswith(place.rstrip("/") + "/")


def views_refused(uid: int | None) -> str | None:
    """Why a command running as `uid` (None: this process's) could not have views here,
    or None: a throwaway child tries to make its own mount namespace. The C library is
    loaded first, here: the child (and the command's process after it) imports nothing,
    as the sandbox's user may not be able to read the interpreter's modules."""
    libc()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's outcome is its exit status
        code = 255  # anything but an OSError: it must never go on as the judge's copy
        try:
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            own_mount_namespace()
            code = 0
        except OSError as error:
            code = error.errno or 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return None
    return (
        f"user namespaces are refused here ({os.strerror(code) if code > 0 else 'killed'}): "
        "a seccomp profile (docker's default, Kubernetes' RuntimeDefault) or the kernel "
        "(user.max_user_namespaces, an AppArmor restriction) forbids them"
    )
