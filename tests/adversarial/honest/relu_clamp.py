"""Honest: ReLU as clamp_min."""

from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0.0)
