"""Batched GEMM, 64 products of 1024^2: many medium matrices in one call."""

import torch
from torch import nn

B, N = 64, 1024


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(B, N, N), torch.randn(B, N, N)]


def get_init_inputs():
    return []
