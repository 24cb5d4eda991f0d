"""Level 3: a four-layer MLP at batch 16, the serving regime where kernel launches, not FLOPs, set the time."""

import itertools

import torch
from torch import nn

BATCH, SIZES = 16, [1024, 2048, 2048, 2048, 1024]


class Model(nn.Module):
    def __init__(self, sizes: list[int]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for d_in, d_out in itertools.pairwise(sizes):
            layers += [nn.Linear(d_in, d_out), nn.ReLU()]
        self.net = nn.Sequential(*layers[:-1])  # no ReLU after the last layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def get_inputs():
    return [torch.randn(BATCH, SIZES[0])]


def get_init_inputs():
    return [SIZES]
