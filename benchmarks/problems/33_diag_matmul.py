"""Level 1 (KernelBench's diagonal-matrix product): diag(a) @ B, the n×n diagonal built and multiplied."""

import torch
from torch import nn

N, M = 4096, 4096


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.diag(a) @ b


def get_inputs():
    return [torch.randn(N), torch.randn(N, M)]


def get_init_inputs():
    return []
