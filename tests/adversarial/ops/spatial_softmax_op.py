"""Adversarial-suite operator: a softmax over each map's pixels (a keypoint head), so every output element is
far below float32's atol (attacker round 54)."""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, heat: torch.Tensor) -> torch.Tensor:
        return torch.softmax(heat.flatten(1), dim=-1).view_as(heat)


def get_inputs():
    return [0.5 * torch.randn(2, 512, 512)]  # each probability < 5e-5 (atol is 1e-4)


def get_init_inputs():
    return []
