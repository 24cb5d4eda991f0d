"""sum(x @ W.T, dim=1) with [1024, 8192] x [8192, 8192] whose rows cancel in pairs: outputs of ~80 from 8192
terms of ~90, where float32 is only accurate to ~3e-3. The exact rewrite x @ W.sum(0) must pass by the
float64 rule (the elementwise 1e-4 rejects it)."""

import torch
from torch import nn

M, K, N = 1024, 8192, 8192


class Model(nn.Module):
    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        half = torch.randn(n // 2, k)
        self.weight = nn.Parameter(torch.cat([half, -half]) + 0.01 * torch.randn(n, k))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x @ self.weight.T, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return [K, N]
