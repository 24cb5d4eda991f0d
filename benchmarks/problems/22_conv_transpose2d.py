"""Transposed 2-D convolution, kernel 4, stride 2, padding 1 (doubles H and W)."""

import torch
from torch import nn

N, C_IN, C_OUT, H, W = 16, 64, 32, 64, 64


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.deconv = nn.ConvTranspose2d(c_in, c_out, kernel_size=4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deconv(x)


def get_inputs():
    return [torch.randn(N, C_IN, H, W)]


def get_init_inputs():
    return [C_IN, C_OUT]
