"""Cheat (lower precision): computes in bfloat16 and casts back against a full-float32 reference."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return (a.bfloat16() @ b.bfloat16()).float()
