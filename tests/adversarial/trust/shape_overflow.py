"""Attack: answer with an empty tensor whose shape overflows torch's element count, so that reading the answer
raises in the judge: the failure must stay the candidate's, never the operator's."""

import json
import os
import struct
import sys

import torch
from torch import nn


def _forge():
    spec = {"dtype": "float32", "shape": [2**39, 2**39, 0]}
    body = json.dumps({"ok": True, "n": 0, "tensors": [spec]}).encode()
    os.write(int(sys.argv[2]), struct.pack(">Q", len(body)) + body)


class ModelNew(nn.Module):
    def forward(self, a, b):
        _forge()
        return torch.matmul(a, b)
