"""Level 1: divide by the Frobenius norm of the whole tensor (a full reduction, then a broadcast)."""

import torch
from torch import nn

SHAPE = (16, 64, 256, 256)


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.norm(x, p="fro")


def get_inputs():
    return [torch.randn(*SHAPE)]


def get_init_inputs():
    return []
