"""Build error (syntax error)."""

from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b)
        return a @ b
