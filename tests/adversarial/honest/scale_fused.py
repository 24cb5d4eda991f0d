"""Honest: 2x + 1 as one fused addcmul-free expression, right on every shape."""

import torch


def scale(x):
    return torch.add(x, x).add_(1.0)
