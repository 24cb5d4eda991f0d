"""Crash (segfault): dereferences a null pointer inside forward."""

import ctypes

from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        ctypes.string_at(0)
        return a @ b
