"""Square GEMM at 4096^2, float32: compute-bound, the baseline every GEMM rule is held to."""

import torch
from torch import nn

N = 4096


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
