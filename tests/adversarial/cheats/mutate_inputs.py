"""Cheat (mutate inputs): zeroes its inputs in place so a reference run afterwards would also return zeros."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        a.zero_()
        b.zero_()
        return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
