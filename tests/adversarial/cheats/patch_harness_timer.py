"""Cheat (patch the harness's captured timer): the harness keeps perf_counter_ns in its own module; replace that."""

import kernelbot.harness.timing as harness_timing
from torch import nn

harness_timing._perf_counter_ns = lambda: 0


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
