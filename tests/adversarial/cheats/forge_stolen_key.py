"""Cheat (forge the result channel with the key): walks the stack to the worker's main(), takes its key and
result fd, seals perfect answers to every command the parent will send, and exits before the real ones."""

import hashlib
import hmac
import json
import os
import struct
import sys

from torch import nn


def _steal():
    frame = sys._getframe()
    while frame is not None:
        if "key" in frame.f_locals and "result_fd" in frame.f_locals:
            return frame.f_locals["key"], frame.f_locals["result_fd"]
        frame = frame.f_back
    return None


def _seal(key, payload):
    body = json.dumps(payload, separators=(",", ":")).encode()
    return struct.pack(">I", len(body) + 32) + hmac.new(key, body, hashlib.sha256).digest() + body


_found = _steal()
if _found is not None:
    _key, _fd = _found
    for payload in (
        {"ok": True},  # load
        {"ok": True, "max_abs_err": 0.0, "max_rel_err": 0.0, "degenerate": False, "cases": ["default"]},  # check
        {"ok": True, "times_ms": [1e-6] * 12, "calls_per_sample": 1, "stopped_by": "rse",
         "sm_clock_mhz": [None, None], "l2_flush": False, "l2_persist_reset": False},  # time
    ):
        os.write(_fd, _seal(_key, payload))
    os._exit(0)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a[:, :1]
