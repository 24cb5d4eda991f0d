"""Crash (hang): forward never returns."""

from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        while True:
            pass
