"""Level 2: Linear, GELU, and the row sums beside the activations (two outputs)."""

import torch
from torch import nn

BATCH, IN_FEATURES, OUT_FEATURES = 512, 2048, 2048


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.nn.functional.gelu(self.linear(x))
        return y, y.sum(dim=1)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
