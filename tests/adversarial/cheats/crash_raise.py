"""Crash (exception inside forward)."""

from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        raise ValueError("kernel launch failed: too many resources requested")
