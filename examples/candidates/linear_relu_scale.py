"""Candidate: one addmm with both biases as its addend, then ReLU and the scale in place on its output."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.extra_bias = nn.Parameter(torch.randn(out_features) * 0.02)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = self.linear.bias + self.extra_bias  # out_features elements: negligible next to the GEMM
        y = torch.addmm(bias, x, self.linear.weight.t())
        return y.relu_().mul_(self.scale)  # y is our own output buffer
