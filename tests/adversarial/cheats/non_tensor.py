"""Non-tensor output (a NumPy array)."""

from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return (a @ b).cpu().numpy()
