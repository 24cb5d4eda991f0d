"""Mean over the middle dimension of a 3-D tensor.

A mean, not a sum, on purpose: a float32 sum of 4096 values has rounding errors near 1e-4 where the
result is close to zero, so a plain sum fails the absolute 1e-4 tolerance under any reordering
(torch.compile's included) without being wrong.
"""

import torch
from torch import nn

B, D, S = 128, 4096, 256


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=1)


def get_inputs():
    return [torch.randn(B, D, S)]


def get_init_inputs():
    return []
