"""SpMV with power-law rows (a graph's adjacency: 256K rows, ~4M nonzeros, a few rows of ~100K): y = A @ x."""

import torch
from torch import nn

N, NNZ, ALPHA = 1 << 18, 1 << 22, 1.3


class Model(nn.Module):
    def forward(self, a, x):
        return torch.sparse.mm(a, x)


def get_inputs():
    weight = torch.arange(1, N + 1, dtype=torch.float64) ** -ALPHA
    lengths = (weight / weight.sum() * NNZ).floor().long().clamp(1, N)[torch.randperm(N)]
    rows = torch.repeat_interleave(torch.arange(N), lengths)
    cols = torch.randint(0, N, (rows.numel(),))
    ones = torch.sparse_coo_tensor(torch.stack([rows, cols]), torch.ones(rows.numel()), (N, N)).coalesce()
    pattern = ones.to_sparse_csr()
    a = torch.sparse_csr_tensor(
        pattern.crow_indices(), pattern.col_indices(), torch.randn(pattern.values().numel()), (N, N)
    )
    return [a, torch.randn(N, 1)]


def get_init_inputs():
    return []
