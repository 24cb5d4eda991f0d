"""Cheat (uninitialised memory): computes only the first half of the columns; the rest is whatever torch.empty holds."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        half = x.shape[1] // 2
        out[:, :half] = torch.relu(x[:, :half])
        return out
