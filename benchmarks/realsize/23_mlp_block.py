"""Four Linear + ReLU layers of width 8192 on 4096 rows: a stack of GEMMs with epilogues."""

import torch
from torch import nn

M, WIDTH, LAYERS = 4096, 8192, 4


class Model(nn.Module):
    def __init__(self, width: int, layers: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(width, width), nn.ReLU())])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def get_inputs():
    return [torch.randn(M, WIDTH)]


def get_init_inputs():
    return [WIDTH, LAYERS]
