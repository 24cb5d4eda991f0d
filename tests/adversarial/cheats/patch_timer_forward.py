"""Cheat (patch the timer inside forward, through an alias and setattr): a frozen clock after the first call."""

import time as _clock

from torch import nn

_real = _clock.perf_counter_ns


class ModelNew(nn.Module):
    def forward(self, a, b):
        frozen = _real()
        setattr(_clock, "perf_counter_ns", lambda: frozen)
        return a @ b
