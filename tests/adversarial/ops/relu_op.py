"""Adversarial-suite operator: elementwise ReLU (KernelBench form, CPU sized)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(32, 257)]


def get_init_inputs():
    return []
