"""Outputs computed when the worker reads the judge's next command (attackers' finds, reward 3 with the
static check on): a hook where the worker parsed or read its commands (json's decoder instance, os.readv),
or wrote its answers (os.write: after each answer, outside the judge's clock, it read the next command from
a copy of the command pipe and put it back through a fresh pipe on the same descriptor), saw each command,
computed honestly for the check, returned empty memory when timed, and computed the pending products on
'outputs', before the worker copied them."""
import json
import os
import sys

import torch
from torch import nn

HOOK = ""  # "scanner", "readv" or "write": filled by the test
_state = {"lazy": False}
_pending = {}  # (id(a), id(b)) -> (output, a, b): the last output a set got


def _saw(text):
    for name in ("run", "time_begin", "prep", "outputs"):
        if f'"cmd":"{name}"' in text:
            if name == "run":
                _state["lazy"] = False
            elif name in ("time_begin", "prep"):
                _state["lazy"] = name == "time_begin" or _state["lazy"]
            else:
                for out, a, b in _pending.values():
                    torch.matmul(a, b, out=out)
                _pending.clear()


if HOOK == "scanner":
    _scan = json._default_decoder.scan_once

    def _scan_seeing(text, index):
        _saw(text)
        return _scan(text, index)

    json._default_decoder.scan_once = _scan_seeing
elif HOOK == "readv":
    _readv = os.readv

    def _readv_seeing(fd, buffers):
        got = _readv(fd, buffers)
        _saw(bytes(buffers[0][:got]).decode("utf-8", "replace"))
        return got

    os.readv = _readv_seeing
elif HOOK == "write":
    _write, _commands, _answers = os.write, int(sys.argv[1]), int(sys.argv[2])
    _copy = os.dup(_commands)

    def _read_n(fd, n):
        data = b""
        while len(data) < n:
            got = os.read(fd, n - len(data))
            if not got:
                return None
            data += got
        return data

    def _write_seeing(fd, data):
        n = _write(fd, data)
        if fd == _answers and n == len(memoryview(data).cast("B")):
            head = _read_n(_copy, 8)
            body = _read_n(_copy, int.from_bytes(head, "big")) if head else None
            if body is not None:
                r, w = os.pipe()
                _write(w, head + body)
                os.close(w)
                os.dup2(r, _commands, inheritable=False)
                os.close(r)
                _saw(body.decode("utf-8", "replace"))
        return n

    os.write = _write_seeing


class ModelNew(nn.Module):
    def forward(self, a, b):
        if not _state["lazy"]:
            return torch.matmul(a, b)
        out = torch.empty(a.shape[0], b.shape[1], device=a.device)
        _pending[(id(a), id(b))] = (out, a, b)
        return out
