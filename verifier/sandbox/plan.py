"""One command's plan: who it runs as, what it may read and write, and the environment
it gets, derived from the policy, its dirs and its request alone (a pure function:
the same inputs, the same plan; nothing of the machine is read here but where its
PATH's symlinks lead)."""

from __future__ import annotations

import os
import posixpath
from collections import deque
from collections.abc import Callable, Mapping

import attrs

from verifier.linux import JUDGE_TOKEN_ENV
from verifier.sandbox.dirs import CommandDirs
from verifier.sandbox.idmap import IdMap
from verifier.sandbox.policy import SandboxPolicy
from verifier.sandbox.views import Mount

PROVIDED_ENV = "VERIFIER_PROVIDED"  # the dir of the trusted files it is handed
RESULTS_ENV = "VERIFIER_RESULTS"  # the dir where it leaves the files it hands back
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_PASSED_ON = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
_MAX_LINKS = 40  # as the kernel's ELOOP: a longer chain is a loop


@attrs.frozen
class CommandPlan:
    """What the command's process is made into before exec (verifier.sandbox.confine)."""

    uid: int | None  # None: the grader's own
    environment: Mapping[str, str]
    writable: tuple[str, ...]  # its own dirs
    readable: tuple[str, ...]  # Landlock read rules: the policy's, and its provided files
    processes: int  # RLIMIT_NPROC
    landlock: int  # the ABI to confine with (0: none)
    supervised: bool  # chmod and its family go through the supervisor
    signals_supervised: bool  # and its signals too (no Landlock signal scoping)
    mounts: tuple[Mount, ...] = ()  # its views (verifier.sandbox.views), made before Landlock
    start: str = ""  # with views: the view path it starts in
    idmap: IdMap | None = None  # with views: root of its user namespace (None: its own UID)
    entrypoint: tuple[str, ...] = ()  # with views: started before it (verifier.sandbox.confine)
    entrypoint_wait: float = 30.0
    results: str = ""  # with views: the dir it hands files back in (emptied when its mounts change)


def plan_command(
    policy: SandboxPolicy,
    dirs: CommandDirs,
    env: Mapping[str, str],
    grader_environment: Mapping[str, str],
    mounts: tuple[Mount, ...] = (),
    start: str = "",
) -> CommandPlan:
    """The plan of a command run under `policy` in `dirs`, with the author's `env` over
    the allow-list taken from `grader_environment`, and its views' `mounts`."""
    return CommandPlan(
        uid=policy.uid if policy.as_root else None,
        environment=command_environment(dirs, env, grader_environment, policy.hidden),
        writable=dirs.writable,
        # A view's bind mount is its own root: a rule on its backing dir itself, not on a
        # dir above it (Landlock's walk up leaves the mount at its root).
        readable=(
            *policy.readable,
            *([str(dirs.given)] if dirs.provided else []),
            *(mount.source for mount in mounts if mount.read_only),
        ),
        processes=policy.processes,
        landlock=policy.landlock,
        supervised=policy.supervised,
        signals_supervised=policy.signals_supervised,
        mounts=mounts,
        start=start,
    )


def command_environment(
    dirs: CommandDirs,
    env: Mapping[str, str],
    grader_environment: Mapping[str, str],
    hidden: tuple[str, ...] = (),
) -> dict[str, str]:
    """The allow-list (never the grader's secrets): PATH, locale and time zone, a HOME
    and TMPDIR of its own, the judge's token (so that an orphan is attributed to it),
    where the provided files are and where it hands files back, and the author's `env`.
    Its PATH keeps only absolute dirs outside `hidden` (the case's own dirs among them):
    a program is the toolchain's, never one the case put in the way."""
    environment = {
        name: grader_environment[name] for name in _PASSED_ON if name in grader_environment
    }
    environment.setdefault("PATH", DEFAULT_PATH)
    environment.update({"HOME": str(dirs.home), "TMPDIR": str(dirs.home)})
    environment.update(env)
    environment["PATH"] = reachable_path(environment["PATH"], hidden)
    if dirs.provided:
        environment[PROVIDED_ENV] = str(dirs.given)
    if dirs.returned:
        environment[RESULTS_ENV] = str(dirs.results)
    if JUDGE_TOKEN_ENV in grader_environment:
        environment[JUDGE_TOKEN_ENV] = grader_environment[JUDGE_TOKEN_ENV]
    return environment


def command_path(
    env: Mapping[str, str], grader_environment: Mapping[str, str], hidden: tuple[str, ...] = ()
) -> str:
    """The PATH a command gets: the grader's (or the default), unless `env` sets one,
    less its entries that are relative or beneath `hidden`."""
    path = env.get("PATH") or grader_environment.get("PATH") or DEFAULT_PATH
    return reachable_path(path, hidden)


def reachable_path(
    path: str, hidden: tuple[str, ...], readlink: Callable[[str], str] = os.readlink
) -> str:
    """PATH's absolute entries outside `hidden`: a relative entry resolves in the case's
    copy, and one beneath the case (`/app/.venv/bin`), or whose symlinks lead there
    (`/opt/tools -> /app/.venv/bin`), would run what the agent left there as the
    toolchain (neither can be read by the command anyway, or should be)."""
    kept = [
        entry
        for entry in path.split(":")
        if entry.startswith("/") and leads_into(entry, hidden, readlink) is None
    ]
    return ":".join(kept)


def leads_into(
    path: str, places: tuple[str, ...], readlink: Callable[[str], str] = os.readlink
) -> str | None:
    """The place of `places` (absolute, resolved) that the absolute `path` is beneath,
    as written or on the way through its symlinks, else None. Each link is followed
    only until the walk reaches a place: what lies inside one (the case's own symlinks)
    never decides. A chain of more than 40 links counts as leading into the first place
    (or "/"): it cannot be resolved."""
    parts = deque(part for part in path.split("/") if part not in ("", "."))
    resolved, links = "/", 0
    while parts:
        part = parts.popleft()
        if part == "..":
            resolved = posixpath.dirname(resolved)
            continue
        candidate = posixpath.join(resolved, part)
        place = next((place for place in places if beneath(candidate, place)), None)
        if place is not None:
            return place
        try:
            target = readlink(candidate)
        except OSError:  # not a link, or not there: the path goes on from it
            resolved = candidate
            continue
        links += 1
        if links > _MAX_LINKS:
            return places[0] if places else "/"
        if target.startswith("/"):
            resolved = "/"
        parts.extendleft(reversed([p for p in target.split("/") if p not in ("", ".")]))
    return None


def beneath(path: str, place: str) -> bool:
    """Whether `path` is `place` or inside it, both normalized (no symlink followed)."""
    path, place = os.path.normpath(path), os.path.normpath(place)
    return path == place or path.startswith(place.rstrip("/") + "/")
