"""Cheat (a real segmentation fault of the subject process, raised without ctypes): a typed crash."""

import signal

from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        signal.raise_signal(signal.SIGSEGV)
        return a @ b
