"""Candidate: mean_j (x @ W.T / t)[:, j] = x @ (mean_j W[j, :] / t), a matrix-vector product instead of a GEMM."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, temperature: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features**0.5)
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = torch.mean(self.weight, dim=0) / self.temperature  # one pass over W per call
        return torch.mv(x, w).unsqueeze(1)
