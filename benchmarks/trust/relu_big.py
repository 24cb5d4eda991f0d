"""A GPU-sized ReLU (KernelBench form) for the sandbox's CUDA check: 64 MiB in, 64 MiB out."""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
