"""3x3x3 convolution, 32 -> 64 channels, batch 8 over 32 x 64 x 64 volumes."""

import torch
from torch import nn

B, C_IN, C_OUT, D, H = 8, 32, 64, 32, 64


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv3d(c_in, c_out, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(B, C_IN, D, H, H)]


def get_init_inputs():
    return [C_IN, C_OUT]
