"""Attacker round 26's probe: a property on importlib's ModuleSpec. Every import torch's C++ makes (two a
refresh: an operator given a Python float scalar) reads `torch.__spec__._initializing`, so the property's
code runs inside the refresh, after the check. Here it only counts; the work stays in the timed calls.
ModuleSpec is watched now, and a descriptor added to a watched class is refused at the check."""
import importlib.machinery

from torch import nn

seen = [0]


def _initializing(self):
    seen[0] += 1
    return False


importlib.machinery.ModuleSpec._initializing = property(_initializing)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
