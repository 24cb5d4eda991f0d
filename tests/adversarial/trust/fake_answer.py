"""Attack: queue a perfect answer on the pipe to the judge before it asks (a sample timed as instant)."""

import json
import os
import struct
import sys

import torch
from torch import nn


def _queue():
    body = json.dumps({"ok": True, "n": 0, "ms_total": 1e-9, "tensors": []}).encode()
    os.write(int(sys.argv[2]), struct.pack(">Q", len(body)) + body)


class ModelNew(nn.Module):
    def forward(self, a, b):
        _queue()
        return torch.matmul(a, b)
