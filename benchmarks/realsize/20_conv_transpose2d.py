"""Transposed 4x4 convolution, stride 2, 128 -> 64 channels, batch 16 at 64^2 (to 128^2)."""

import torch
from torch import nn

B, C_IN, C_OUT, H = 16, 128, 64, 64


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.deconv = nn.ConvTranspose2d(c_in, c_out, 4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deconv(x)


def get_inputs():
    return [torch.randn(B, C_IN, H, H)]


def get_init_inputs():
    return [C_IN, C_OUT]
