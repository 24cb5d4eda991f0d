"""Level 1: EmbeddingBag, mean of each bag (int64 indices and sorted offsets: inputs with structure)."""

import torch
from torch import nn

NUM_EMBEDDINGS, DIM, BAGS, PER_BAG = 50000, 256, 2048, 16


class Model(nn.Module):
    def __init__(self, num_embeddings: int, dim: int) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, dim, mode="mean")

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.bag(indices, offsets)


def get_inputs():
    lengths = torch.randint(1, 2 * PER_BAG, (BAGS,))
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)[:-1]])
    indices = torch.randint(0, NUM_EMBEDDINGS, (int(lengths.sum()),))
    return [indices, offsets]


def get_init_inputs():
    return [NUM_EMBEDDINGS, DIM]
