"""A three-layer GRU, input 512, hidden 1024, batch 32 over 512 steps: sequential by nature."""

import torch
from torch import nn

BATCH, STEPS, INPUT, HIDDEN, LAYERS = 32, 512, 512, 1024, 3


class Model(nn.Module):
    def __init__(self, input_size: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.gru = nn.GRU(input_size, hidden, layers, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gru(x)[0]


def get_inputs():
    return [torch.randn(BATCH, STEPS, INPUT)]


def get_init_inputs():
    return [INPUT, HIDDEN, LAYERS]
