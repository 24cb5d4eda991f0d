"""The result channel between the parent and the judge process: length-framed JSON with an HMAC tag.

The judge gets the key over a private pipe that it reads and closes before the operator is imported; the
subject process never has it. Neither process's stdout/stderr is parsed, so printing a fake result achieves
nothing, and a message without the right tag is treated as forgery.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import select
import struct
import time
from typing import Any

# The reason the judge gives when most GPU samples ran far past their event time (worker.py); the pipeline
# recognises it on the operator's own samples, where it means a shared GPU more often than a trick.
HIDDEN_WORK = "the wall time far exceeded the GPU time of the timed stream"

_HEADER = struct.Struct(">I")
MAX_MESSAGE = 64 * 1024 * 1024


class ChannelError(Exception):
    """The channel broke or carried something that was not ours."""


def seal(key: bytes, payload: dict[str, Any]) -> bytes:
    body = json.dumps(payload, separators=(",", ":")).encode()
    tag = hmac.new(key, body, hashlib.sha256).digest()
    return _HEADER.pack(len(body) + len(tag)) + tag + body


def open_sealed(key: bytes, frame: bytes) -> dict[str, Any]:
    tag, body = frame[:32], frame[32:]
    if not hmac.compare_digest(tag, hmac.new(key, body, hashlib.sha256).digest()):
        raise ChannelError("a message on the result channel failed authentication (forged result)")
    result = json.loads(body)
    if not isinstance(result, dict):
        raise ChannelError("a message on the result channel is not an object")
    return result


def write_frame(fd: int, frame: bytes | memoryview) -> None:
    view = memoryview(frame).cast("B")
    while view:
        written = _write(fd, view)
        view = view[written:]


def widen(fd: int) -> None:
    """A 1 MiB buffer for this pipe, or the most the system allows (64 KiB by default; a tensor crosses in
    far fewer reads and wake-ups with 1 MiB). A pipe it cannot widen still works."""
    try:
        with open("/proc/sys/fs/pipe-max-size") as handle:
            size = min(int(handle.read()), 1 << 20)  # more would eat the user's pipe pages for other pipes
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)
    except (OSError, ValueError):
        pass


# Bound before any subject code runs: the subject process reads its commands through these, and a hook in a
# module function looked up at call time (os.readv, select.select) ran the subject's code there, between its
# last timed call and the copy of that call's outputs (an attacker's find, reward 3).
_select, _readv, _monotonic = select.select, os.readv, time.monotonic
# The answer's write too: a hook in os.write ran after each answer, outside the judge's clock, read the next
# command from a copy of the pipe and computed the outputs before the copy (attacker round 4, reward 3).
_write = os.write


def read_into(fd: int, buffer: bytearray | memoryview, deadline: float) -> None:
    """Fill `buffer` from `fd` (no intermediate copies: a tensor's bytes land where the tensor will live)."""
    view = memoryview(buffer).cast("B")
    while view:
        left = deadline - _monotonic()
        if left <= 0 or not _select([fd], [], [], left)[0]:
            raise TimeoutError("no complete message before the deadline")
        got = _readv(fd, [view])
        if not got:
            raise ChannelError("the channel closed mid-message")
        view = view[got:]


def read_exact(fd: int, size: int, deadline: float) -> bytes:
    buffer = bytearray(size)
    read_into(fd, buffer, deadline)
    return bytes(buffer)


def read_frame(fd: int, deadline: float) -> bytes:
    (size,) = _HEADER.unpack(read_exact(fd, _HEADER.size, deadline))
    if size > MAX_MESSAGE or size < 32:
        raise ChannelError(f"a message on the result channel has an impossible size ({size} bytes)")
    return read_exact(fd, size, deadline)
