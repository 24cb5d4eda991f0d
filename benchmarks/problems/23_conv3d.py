"""3-D convolution, 3x3x3, padding 1."""

import torch
from torch import nn

N, C_IN, C_OUT, D = 8, 16, 32, 32


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv3d(c_in, c_out, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(N, C_IN, D, D, D)]


def get_init_inputs():
    return [C_IN, C_OUT]
