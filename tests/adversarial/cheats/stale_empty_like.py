"""Cheat (stale memory): computes nothing, returns fresh uninitialised memory hoping it holds the reference's freed output."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
