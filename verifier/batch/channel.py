"""Messages between the batch's processes, over a pair of pipes: data only.

A message is framed (its length, then its body) and its body is JSON: reading one
can build nothing but the records a channel was opened for (`Channel(types=...)`),
never run code, so bytes that something else slipped into a pipe can at worst be
refused. A frame over MAX_MESSAGE_BYTES, a body that is not JSON, or a record of a
type the channel does not carry is a ChannelError; the pipe is then out of step and
its other end is to be let go. `messages()` takes what a readable pipe holds without
waiting for the rest of a frame, so that no writer, however broken, can hang a reader
that has other pipes to serve.

multiprocessing.connection would do the framing, but it loads socket, array and
tempfile (and with tempfile shutil, bz2, lzma and random) into every worker, and
every extension library a worker holds makes each of its judges' forks and exits
dearer. A reader whose other end is gone gets EOFError, a writer OSError (EPIPE).
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import json
import os
import select
import struct
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePath
from typing import Any

import attrs

MAX_MESSAGE_BYTES = 256 * 1024**2
_DECODE_DEPTH = 1000  # Python's default recursion limit: far deeper than any record nests
_LENGTH = struct.Struct("!Q")
_READ_CHUNK = 1 << 20
_TAG = "\x00"  # the key of a tagged value: {"\x00": kind, "v": ...}


class ChannelError(Exception):
    """What arrived is not a message this channel carries."""


class Channel:
    """One end: it reads what the other end sends, and sends what the other end reads.

    `types`: the records (attrs classes) and enums the channel may carry, by
    "module:Name"; each is imported when a message first names it."""

    __slots__ = ("_buffer", "_read", "_types", "_write")

    def __init__(self, read_fd: int, write_fd: int, types: Iterable[str] = ()) -> None:
        self._read = read_fd
        self._write = write_fd
        self._types = frozenset(types)
        self._buffer = bytearray()

    def fileno(self) -> int:
        """The descriptor that becomes readable when a message (or the end) arrives."""
        return self._read

    def fds(self) -> tuple[int, int]:
        return self._read, self._write

    def send(self, message: object) -> None:
        data = json.dumps(self._encode(message), separators=(",", ":")).encode()
        if len(data) > MAX_MESSAGE_BYTES:
            raise ChannelError(
                f"a message of {len(data)} bytes, over the {MAX_MESSAGE_BYTES}-byte bound"
            )
        view = memoryview(_LENGTH.pack(len(data)) + data)
        while view:
            view = view[os.write(self._write, view) :]

    def recv(self) -> Any:
        """The next message, waiting for it (for ends whose writer is trusted)."""
        while True:
            message = self._next_message()
            if message is not _INCOMPLETE:
                return message
            chunk = os.read(self._read, _READ_CHUNK)
            if not chunk:
                raise EOFError("the other end of the channel is closed")
            self._buffer += chunk

    def messages(self) -> list[Any]:
        """The messages complete after one read of what the pipe holds now (the pipe is
        readable): maybe none. EOFError when the other end is closed."""
        chunk = os.read(self._read, _READ_CHUNK)
        if not chunk:
            raise EOFError("the other end of the channel is closed")
        self._buffer += chunk
        found = []
        while (message := self._next_message()) is not _INCOMPLETE:
            found.append(message)
        return found

    def close(self) -> None:
        for fd in self.fds():
            with contextlib.suppress(OSError):
                os.close(fd)

    def _next_message(self) -> Any:
        if len(self._buffer) < _LENGTH.size:
            return _INCOMPLETE
        (length,) = _LENGTH.unpack_from(self._buffer)
        if length > MAX_MESSAGE_BYTES:
            raise ChannelError(
                f"a frame of {length} bytes, over the {MAX_MESSAGE_BYTES}-byte bound"
            )
        end = _LENGTH.size + length
        if len(self._buffer) < end:
            return _INCOMPLETE
        body = bytes(self._buffer[_LENGTH.size : end])
        del self._buffer[:end]
        previous = sys.getrecursionlimit()
        sys.setrecursionlimit(min(previous, _DECODE_DEPTH))  # nesting ends in an error, not
        try:  # in a crash of the C stack (whoever raised the limit)
            return self._decode(json.loads(body))
        except (ValueError, TypeError, KeyError, IndexError, RecursionError) as error:
            raise ChannelError(f"a message that cannot be read ({error})") from None
        finally:
            sys.setrecursionlimit(previous)

    def _encode(self, value: Any) -> Any:
        if isinstance(value, enum.Enum):  # before str: a str enum is one
            return {_TAG: "enum", "t": self._name_of(type(value)), "v": value.value}
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if attrs.has(type(value)):  # its fields in order, as when records were tuples
            name = self._name_of(type(value))
            fields = [
                self._encode(getattr(value, field.name)) for field in attrs.fields(type(value))
            ]
            return {_TAG: "record", "t": name, "v": fields}
        if isinstance(value, list | tuple):
            return {_TAG: type(value).__name__, "v": [self._encode(item) for item in value]}
        if isinstance(value, Mapping):
            pairs = [[self._encode(key), self._encode(item)] for key, item in value.items()]
            return {_TAG: "dict", "v": pairs}
        if isinstance(value, PurePath):
            return {_TAG: "path", "v": str(value)}
        raise TypeError(f"a {type(value).__name__} cannot be sent over a channel")

    def _decode(self, value: Any) -> Any:
        if not isinstance(value, dict):
            if isinstance(value, list):
                raise ValueError("an untagged list")
            return value
        kind, items = value[_TAG], value["v"]
        if kind == "list":
            return [self._decode(item) for item in items]
        if kind == "tuple":
            return tuple(self._decode(item) for item in items)
        if kind == "dict":
            return {_hashable(self._decode(key)): self._decode(item) for key, item in items}
        if kind == "path":
            return Path(_text(items))
        cls = self._type(value["t"])
        if kind == "enum" and issubclass(cls, enum.Enum):
            return cls(items)
        if kind == "record" and isinstance(items, list) and attrs.has(cls):
            if len(items) != len(attrs.fields(cls)):
                raise ValueError(f"{value['t']} takes {len(attrs.fields(cls))} fields")
            return cls(*(self._decode(item) for item in items))
        raise ValueError(f"a {kind!r} of type {value['t']!r}")

    def _name_of(self, cls: type) -> str:
        name = f"{cls.__module__}:{cls.__qualname__}"
        if name not in self._types:
            raise TypeError(f"{name} is not one of the records this channel carries")
        return name

    def _type(self, name: Any) -> type:
        if not isinstance(name, str) or name not in self._types:
            raise ValueError(f"{name!r} is not one of the records this channel carries")
        module, _, qualified = name.partition(":")
        found: Any = importlib.import_module(module)
        for part in qualified.split("."):
            found = getattr(found, part)
        return found


_INCOMPLETE = object()


def _hashable(key: Any) -> Any:
    if isinstance(key, list | dict):
        raise ValueError("an unhashable key")
    return key


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("a path that is not text")
    return value


def channel_pair(types: Iterable[str] = ()) -> tuple[Channel, Channel]:
    """Two connected ends (close-on-exec) carrying `types`: one for the parent, one for
    the child."""
    carried = tuple(types)
    first_read, second_write = os.pipe2(os.O_CLOEXEC)
    second_read, first_write = os.pipe2(os.O_CLOEXEC)
    return Channel(first_read, first_write, carried), Channel(second_read, second_write, carried)


def wait(waitables: Iterable[Any], timeout: float | None = None) -> list[Any]:
    """Those of waitables (descriptors, or objects with fileno()) that are readable or
    closed, once one is or when timeout (seconds) has passed."""
    poller = select.poll()
    by_fd = {}
    for waitable in waitables:
        fd = waitable if isinstance(waitable, int) else waitable.fileno()
        by_fd[fd] = waitable
        poller.register(fd, select.POLLIN)
    events = poller.poll(None if timeout is None else timeout * 1000)
    return [by_fd[fd] for fd, _ in events]
