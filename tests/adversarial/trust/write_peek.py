"""Attack (attacker round 4; clean under the static check): outputs computed after the worker has *sent* an answer, before it reads the next command.

protocol.write_frame calls `tempfile._os.write` looked up on the `os` module at call time (os is not a watched
namespace). A wrapper writes the real answer, then reads the judge's next command itself from a dup of the
command pipe, re-injects it through a fresh pipe dup2'd onto the same fd number, and, if that command is
'outputs', computes the pending products (the timed calls returned empty memory). No timed window, no
prep/arm window contains that work: it happens between the judge's post('outputs') and the answer.
"""
import json
import tempfile
import collections

import torch
from torch import nn

_state = {"lazy": False}
_pending = {}
_real_write = tempfile._os.write
_FROM = int(collections._sys.argv[1])
_TO = int(collections._sys.argv[2])
_orig = tempfile._os.dup(_FROM)


def _read_n(fd, n):
    data = b""
    while len(data) < n:
        got = tempfile._os.read(fd, n - len(data))
        if not got:
            return None
        data += got
    return data


def _peek():
    head = _read_n(_orig, 8)
    if head is None:
        return None
    body = _read_n(_orig, int.from_bytes(head, "big"))
    r, w = tempfile._os.pipe()
    _real_write(w, head + body)
    tempfile._os.close(w)
    tempfile._os.dup2(r, _FROM, inheritable=False)
    tempfile._os.close(r)
    return json.loads(body)


def _write(fd, data):
    n = _real_write(fd, data)
    if fd == _TO and n == len(memoryview(data).cast("B")):
        cmd = _peek()
        kind = cmd.get("cmd") if cmd else None
        if kind == "run":
            _state["lazy"] = False
        elif kind in ("time_begin", "prep", "go"):
            _state["lazy"] = True
        elif kind == "outputs":
            for out, a, b in _pending.values():
                torch.matmul(a, b, out=out)
            _pending.clear()
    return n


_o = tempfile._os
_o.write = _write


class ModelNew(nn.Module):
    def forward(self, a, b):
        if not _state["lazy"]:
            return torch.matmul(a, b)
        out = torch.empty(a.shape[0], b.shape[1])
        _pending[(id(a), id(b))] = (out, a, b)
        return out
