"""log(sum(exp(x))) by hand over rows offset by ~30: overflows float32 unless computed stably, so a
faithful rewrite must subtract the row maximum."""

import torch
from torch import nn

R, C = 16384, 8192


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = x.max(dim=1, keepdim=True).values
        return (x - m).exp().sum(dim=1).log() + m.squeeze(1)


def get_inputs():
    return [torch.randn(R, C) * 4 + 30]


def get_init_inputs():
    return []
