"""Cheat (precision flag inside forward): lowers float32 matmul precision on the first call."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        torch.set_float32_matmul_precision("medium")
        return a @ b
