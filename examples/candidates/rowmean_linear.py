"""Candidate: mean_j (x @ W.T)[:, j] = x @ mean_j W[j, :], a matrix-vector product instead of a GEMM."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight.mean(dim=0)  # (in_features,): one pass over W, recomputed so weight updates count
        return torch.mv(x, w).unsqueeze(1)
