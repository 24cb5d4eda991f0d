"""Candidate: torch.var (a single Welford pass) instead of a mean pass, a subtract, a square and a second mean."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.var(x, dim=-1, correction=0)
