"""Level 2: Conv2d, GroupNorm, Tanh, HardSwish."""

import torch
from torch import nn

BATCH, IN_CH, OUT_CH, SIZE, GROUPS = 32, 16, 64, 64, 8


class Model(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, groups: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, 3, padding=1)
        self.norm = nn.GroupNorm(groups, out_ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.hardswish(torch.tanh(self.norm(self.conv(x))))


def get_inputs():
    return [torch.randn(BATCH, IN_CH, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CH, OUT_CH, GROUPS]
