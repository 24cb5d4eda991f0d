"""sum(x - mean(x)) per row of [16384, 16384]: the result cancels to ~0 from terms of ~1, where any
summation order is as good as float32 allows (the float64 rule decides)."""

import torch
from torch import nn

R, C = 16384, 16384


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean(dim=1, keepdim=True)).sum(dim=1)


def get_inputs():
    return [torch.randn(R, C) + 3.0]


def get_init_inputs():
    return []
