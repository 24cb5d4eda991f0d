"""Crash (os._exit at import): the process disappears without a word."""

import os

from torch import nn

os._exit(0)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
