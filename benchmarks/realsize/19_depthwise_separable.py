"""Depthwise 3x3 then pointwise 1x1, 256 channels, batch 32 at 56^2: a bandwidth-bound pair."""

import torch
from torch import nn

B, C, H = 32, 256, 56


class Model(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.depthwise = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.pointwise = nn.Conv2d(c, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(self.depthwise(x))


def get_inputs():
    return [torch.randn(B, C, H, H)]


def get_init_inputs():
    return [C]
