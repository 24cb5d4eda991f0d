"""Cheat (forge results on stdout): prints result-shaped JSON and hopes the parent parses its stdout."""

import json

import torch
from torch import nn

_FAKE = json.dumps({"ok": True, "status": "ok", "max_abs_err": 0.0, "max_rel_err": 0.0, "times_ms": [1e-6] * 12})
print(_FAKE, flush=True)


class ModelNew(nn.Module):
    def forward(self, a, b):
        print(_FAKE, flush=True)
        return torch.zeros(a.shape[0], b.shape[1], device=a.device)
