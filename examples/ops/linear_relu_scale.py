"""GEMM with an epilogue: Linear, an extra bias, ReLU, then a scale (KernelBench form)."""

import torch
from torch import nn

BATCH, IN_FEATURES, OUT_FEATURES = 1024, 2048, 2048


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.extra_bias = nn.Parameter(torch.randn(out_features) * 0.02)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        y = y + self.extra_bias
        y = torch.relu(y)
        return y * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, 0.5]
