"""Cheat (forge the result channel without the key): writes a result-shaped frame to the fd named in sys.argv."""

import json
import os
import struct
import sys

import torch
from torch import nn


def _forge():
    body = json.dumps({"ok": True, "max_abs_err": 0.0, "max_rel_err": 0.0, "degenerate": False, "cases": ["default"]}).encode()
    tag = b"\0" * 32  # no key: the best it can do is guess
    os.write(int(sys.argv[2]), struct.pack(">I", len(tag) + len(body)) + tag + body)


class ModelNew(nn.Module):
    def forward(self, a, b):
        _forge()
        return torch.zeros(a.shape[0], b.shape[1], device=a.device)
