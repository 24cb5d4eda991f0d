"""Attention written out: softmax(Q K^T / sqrt(d)) V for 16 x 16 heads, sequence 2048, head 64 —
the pattern a fused (flash) kernel replaces."""

import torch
from torch import nn

B, HEADS, S, D = 16, 16, 2048, 64


class Model(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-2, -1) / (q.shape[-1] ** 0.5)
        return torch.softmax(scores, dim=-1) @ v


def get_inputs():
    return [torch.randn(B, HEADS, S, D) for _ in range(3)]


def get_init_inputs():
    return []
