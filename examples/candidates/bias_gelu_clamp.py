"""Candidate: the same chain in two passes instead of four (addcmul, then GELU and an in-place clamp)."""

import torch
import torch.nn.functional as F
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, features: int, lo: float, hi: float) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.rand(features) + 0.5)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.lo, self.hi = lo, hi

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.addcmul(self.bias, x, self.scale)  # bias + x*scale in one pass
        y = F.gelu(y)
        return y.clamp_(self.lo, self.hi)  # y is our own temporary: clamping it in place is safe
