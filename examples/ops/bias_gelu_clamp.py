"""Elementwise chain: per-feature scale and bias, exact GELU, clamp (KernelBench form)."""

import torch
import torch.nn.functional as F
from torch import nn

ROWS, FEATURES = 2048, 4096


class Model(nn.Module):
    def __init__(self, features: int, lo: float, hi: float) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.rand(features) + 0.5)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.lo, self.hi = lo, hi

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.scale
        y = y + self.bias
        y = F.gelu(y)
        return torch.clamp(y, self.lo, self.hi)


def get_inputs():
    return [torch.randn(ROWS, FEATURES)]


def get_init_inputs():
    return [FEATURES, -0.1, 2.0]
