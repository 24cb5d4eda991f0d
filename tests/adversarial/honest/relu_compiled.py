"""Honest: ReLU through torch.compile (slow on CPU: inductor builds C++)."""

import torch
from torch import nn


@torch.compile
def _relu(x):
    return torch.relu(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return _relu(x)
