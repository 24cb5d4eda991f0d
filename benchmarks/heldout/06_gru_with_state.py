"""Level 3: a two-layer GRU whose initial state is a buffer of the module (returns the output sequence)."""

import torch
from torch import nn

SEQ, BATCH, INPUT, HIDDEN, LAYERS = 128, 32, 256, 512, 2


class Model(nn.Module):
    def __init__(self, input_size: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.gru = nn.GRU(input_size, hidden, layers)
        self.register_buffer("h0", torch.randn(layers, BATCH, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x, self.h0)
        return out


def get_inputs():
    return [torch.randn(SEQ, BATCH, INPUT)]


def get_init_inputs():
    return [INPUT, HIDDEN, LAYERS]
