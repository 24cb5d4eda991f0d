"""GELU over one 6.4 GB float32 tensor (40000 x 40000): memory-bound; the harness itself must fit
its input sets, clones and outputs beside it."""

import torch
from torch import nn

R, C = 40000, 40000


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x)


def get_inputs():
    return [torch.randn(R, C)]


def get_init_inputs():
    return []
