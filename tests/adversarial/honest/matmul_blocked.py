"""Honest: a column-blocked matmul that reads the current stream (read-only) when CUDA is there."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = 32

    def forward(self, a, b):
        if torch.cuda.is_available():
            torch.cuda.current_stream()  # read-only: work stays where the timer looks
        out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        for j in range(0, b.shape[1], self.block):
            torch.mm(a, b[:, j : j + self.block], out=out[:, j : j + self.block])
        return out
