"""Matrix-vector product written as a matmul with a (K, 1) right operand; memory bound."""

import torch
from torch import nn

M, K = 8192, 16384


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, v)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []
