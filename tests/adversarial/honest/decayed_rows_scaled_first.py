"""Honest: the decayed projection with the decay applied to the inputs first: rounding apart from the
reference everywhere, and its rows underflow to subnormals at other places."""
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(128, 128, bias=False)
        self.register_buffer("decay", 0.9 ** torch.arange(512, dtype=torch.float32))

    def forward(self, x):
        return (x * self.decay[:, None]) @ self.linear.weight.t()
