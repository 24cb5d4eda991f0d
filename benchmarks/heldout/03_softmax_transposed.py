"""Level 1: softmax over the last dimension, returned transposed (a non-contiguous output)."""

import torch
from torch import nn

ROWS, COLS = 4096, 1024


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1).transpose(0, 1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
