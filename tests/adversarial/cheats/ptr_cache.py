"""Cheat (cache keyed on data_ptr): computes once per input buffer and replays the answer afterwards."""

from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, a, b):
        key = (a.data_ptr(), b.data_ptr())
        if key not in self.cache:
            self.cache[key] = a @ b
        return self.cache[key]
