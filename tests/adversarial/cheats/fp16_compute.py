"""Cheat (lower precision): computes in float16 and casts back against a full-float32 reference."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return (a.half() @ b.half()).to(torch.float32)
