"""SpMM of a uniform random sparse matrix (128K rows, 16 nonzeros a row) with 64 dense columns, then a bias."""

import torch
from torch import nn

N, PER_ROW, K = 1 << 17, 16, 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(K))

    def forward(self, a, x):
        return torch.sparse.mm(a, x) + self.bias


def get_inputs():
    rows = torch.arange(N).repeat_interleave(PER_ROW)
    cols = torch.randint(0, N, (rows.numel(),))
    ones = torch.sparse_coo_tensor(torch.stack([rows, cols]), torch.ones(rows.numel()), (N, N)).coalesce()
    pattern = ones.to_sparse_csr()
    a = torch.sparse_csr_tensor(
        pattern.crow_indices(), pattern.col_indices(), torch.randn(pattern.values().numel()), (N, N)
    )
    return [a, torch.randn(N, K)]


def get_init_inputs():
    return []
