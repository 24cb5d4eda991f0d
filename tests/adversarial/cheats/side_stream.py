"""Cheat (side stream): launches on a private CUDA stream so timing events on the default stream see nothing.
On a CPU-only machine it falls back to the honest path, so only the static check can catch it here."""

import torch
from torch import nn

_side = torch.cuda.Stream() if torch.cuda.is_available() else None


class ModelNew(nn.Module):
    def forward(self, a, b):
        if _side is None:
            return a @ b
        with torch.cuda.stream(_side):
            return a @ b
