"""Cheat (mutate inputs, only once timing starts): honest for the 10 checked calls, then zeroes its
inputs and returns zeros, so the re-check of timed outputs (reference run on the same input tensors) agrees."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        if self.calls <= 10:  # 5 seeds x (check + determinism re-run)
            return a @ b
        a.zero_()
        return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
