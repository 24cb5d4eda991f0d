"""Crash (sys.exit inside forward)."""

import sys

from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        sys.exit(3)
