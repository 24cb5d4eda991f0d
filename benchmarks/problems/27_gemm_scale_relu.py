"""Level 2: Linear, multiply by a constant, ReLU."""

import torch
from torch import nn

BATCH, IN_FEATURES, OUT_FEATURES = 1024, 4096, 4096


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x) * self.scale)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, 0.75]
