"""Who a command that asks to run as root is inside its own user namespace.

A Harbor task's test.sh runs as root in the agent's container. Here it runs as root
*of its own user namespace*: UID and GID 0 inside are the sandbox's UID outside (the
grader's own UID when the grader is not root), so `id -u` is 0, it owns its private
copies, and it has every capability over what its namespace owns (its mounts, its
processes) and nothing over anything else: real root is never mapped, so a file of
the image that root owns stays root's (a setuid bit on it gives nothing), and no
signal, ptrace or write reaches a process or file outside.

When the grader is root, the namespace also maps UIDs and GIDs 1 to 65535 inside (the
users and groups the tests create with `useradd`, or switch to with `su`) to a range of
real IDs of their own: never root, never a sandbox UID, never an ID of the image's
users, one range per sandbox UID (`id_range`). Only a process that has CAP_SETUID in
the grader's namespace may write such a map, and the command's process has given it
up by then, so a helper forked from the judge's process (`Mapper`) writes it once the
command has made its namespace. Without root, or when the container's own user
namespace has no room for the range (rootless podman maps 65536 IDs), only 0 is
mapped: the tests are root, and the users they create cannot be switched to.
"""

from __future__ import annotations

import contextlib
import os

import attrs

from verifier.linux import prctl

RANGE_IDS = 65535  # IDs 1..65535 inside
_PR_SET_SECUREBITS = 28
_SECBIT_NO_SETUID_FIXUP = 1 << 2
_RANGE_FLOOR = 1 << 31  # real IDs from 2^31 up: far above any image's users
_SLOTS = 1 << 15  # distinct ranges (by the sandbox UID): 2^31 + 2^15 * 2^16 < 2^32 - 1


@attrs.frozen
class IdMap:
    """The command's maps: 0 inside is `uid` (and `gid`) outside; with `base`, IDs 1 to
    RANGE_IDS inside are `base + 1` on."""

    uid: int
    gid: int
    base: int | None = None

    def lines(self, own: int) -> str:
        """uid_map's or gid_map's text, `own` the real ID 0 inside is."""
        text = f"0 {own} 1\n"
        if self.base is not None:
            text += f"1 {self.base + 1} {RANGE_IDS}\n"
        return text

    def describe(self) -> str:
        if self.base is None:
            return "root of its own user namespace (UID 0 inside, no other user mapped)"
        return (
            f"root of its own user namespace (UID 0 inside; UIDs 1-{RANGE_IDS} inside are "
            f"{self.base + 1}-{self.base + RANGE_IDS} outside)"
        )


def id_range(uid: int, maps: tuple[str, str] | None = None) -> int | None:
    """The base of the real IDs that UIDs and GIDs 1 to RANGE_IDS inside map to for the
    sandbox UID `uid`, or None when this process's user namespace (its uid_map and
    gid_map, or `maps`) does not map all of them."""
    base = _RANGE_FLOOR + (uid % _SLOTS) * (RANGE_IDS + 1)
    if maps is None:
        try:
            maps = (_read("/proc/self/uid_map"), _read("/proc/self/gid_map"))
        except OSError:
            return None
    wanted = (base + 1, base + RANGE_IDS)
    return base if all(_covers(text, *wanted) for text in maps) else None


def _read(path: str) -> str:
    with open(path, encoding="ascii") as handle:
        return handle.read()


def _covers(map_text: str, first: int, last: int) -> bool:
    """Whether one extent of the map (`inside outside count` lines) holds first..last."""
    for line in map_text.splitlines():
        fields = line.split()
        if len(fields) == 3 and all(field.isdigit() for field in fields):
            start, count = int(fields[0]), int(fields[2])
            if start <= first and last < start + count:
                return True
    return False


class Mapper:
    """A helper process of the grader's (root, in the grader's user namespace) that
    writes one command's uid_map and gid_map: made before the command's fork, asked by
    the command's process (`ask`, between fork and exec) once it has made its user
    namespace, and reaped by the judge (`close`) once the command started."""

    def __init__(self, idmap: IdMap) -> None:
        self.idmap = idmap
        request_read, self._request = os.pipe()
        self._reply, reply_write = os.pipe()
        self._pid = os.fork()
        if self._pid == 0:  # pragma: no cover - the helper's outcome is the reply
            code = 1
            try:
                os.close(self._request)
                os.close(self._reply)
                code = _serve(idmap, request_read, reply_write)
            finally:
                os._exit(code)
        os.close(request_read)
        os.close(reply_write)

    def ask(self) -> None:
        """In the command's process, in its new user namespace: have the maps written.
        OSError when they were not (the command is not run)."""
        os.write(self._request, str(os.getpid()).encode())
        os.close(self._request)
        answer = os.read(self._reply, 64)
        os.close(self._reply)
        if answer != b"ok":
            raise OSError(1, f"its user namespace's maps: {answer.decode(errors='replace')}")

    def close(self) -> None:
        """In the judge's process: the helper is done (or told to be) and reaped."""
        for descriptor in (self._request, self._reply):
            with contextlib.suppress(OSError):
                os.close(descriptor)
        os.waitpid(self._pid, 0)


def _serve(idmap: IdMap, request: int, reply: int) -> int:  # pragma: no cover - a helper
    data = os.read(request, 32)
    if not data:  # the command never got that far
        return 0
    pid = int(data)
    try:
        # The kernel lets a process write another's maps when it holds CAP_SYS_ADMIN in
        # that namespace, which its owner (the UID that made it) does, and CAP_SETUID
        # and CAP_SETGID where the maps' IDs are: this helper keeps its capabilities as
        # it takes the owner's effective UID (a container's root has no CAP_SYS_ADMIN).
        # A process without a namespace of its own has its maps already: EPERM.
        with contextlib.suppress(OSError):  # without CAP_SETPCAP: as root it may still do
            prctl(_PR_SET_SECUREBITS, _SECBIT_NO_SETUID_FIXUP)
            os.setresuid(-1, idmap.uid, -1)
        for name, text in (
            ("uid_map", idmap.lines(idmap.uid)),
            ("gid_map", idmap.lines(idmap.gid)),
        ):
            descriptor = os.open(f"/proc/{pid}/{name}", os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(descriptor, text.encode())
            finally:
                os.close(descriptor)
    except (OSError, ValueError) as error:
        os.write(reply, str(error).encode()[:64])
        return 1
    os.write(reply, b"ok")
    return 0
