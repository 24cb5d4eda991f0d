"""Build error (the candidate defines no ModelNew)."""

from torch import nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b
