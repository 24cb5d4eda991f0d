"""GroupNorm (32 groups) then SiLU over [32, 256, 64, 64], as in diffusion U-Nets."""

import torch
from torch import nn

B, C, H, GROUPS = 32, 256, 64, 32


class Model(nn.Module):
    def __init__(self, groups: int, c: int) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(groups, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(self.norm(x))


def get_inputs():
    return [torch.randn(B, C, H, H)]


def get_init_inputs():
    return [GROUPS, C]
