"""Linear 8192 -> 8192 on 4096 rows, then GELU: a GEMM with an elementwise epilogue to fuse."""

import torch
from torch import nn

M, K, N = 4096, 8192, 8192


class Model(nn.Module):
    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.linear = nn.Linear(k, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return [K, N]
