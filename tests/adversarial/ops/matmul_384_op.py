"""Adversarial-suite operator: a 384x384 float32 matmul, whose work outweighs its output's copy (attacker round
52's: work moved past a sample's clock shows in the copy's time)."""

import torch
from torch import nn

N = 384


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
