"""Adversarial-suite operator: a projection whose rows decay by 0.9 per position (a retention decay), so the
output is large at the top and, from about row 150 on, far below float32's atol (attacker round 57)."""

import torch
from torch import nn

ROWS = 512


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(128, 128, bias=False)
        self.register_buffer("decay", 0.9 ** torch.arange(ROWS, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.decay[:, None]


def get_inputs():
    return [torch.randn(ROWS, 128)]


def get_init_inputs():
    return []
