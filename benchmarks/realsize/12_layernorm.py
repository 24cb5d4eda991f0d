"""LayerNorm over 4096 features of 32768 rows, with affine parameters."""

import torch
from torch import nn

R, C = 32768, 4096


class Model(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(R, C)]


def get_init_inputs():
    return [C]
