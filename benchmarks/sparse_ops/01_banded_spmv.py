"""SpMV with a banded matrix (a 9-point 1-D stencil's, 1M rows, 9M nonzeros): y = relu(A @ x)."""

import torch
from torch import nn

N, HALF = 1 << 20, 4


class Model(nn.Module):
    def forward(self, a, x):
        return torch.relu(torch.mv(a, x))


def get_inputs():
    i = torch.arange(N)
    col = i[:, None] + torch.arange(-HALF, HALF + 1)  # each row's columns, in order
    keep = (col >= 0) & (col < N)
    crow = torch.zeros(N + 1, dtype=torch.long)
    crow[1:] = keep.sum(1).cumsum(0)
    a = torch.sparse_csr_tensor(crow, col[keep], torch.randn(int(crow[-1])), (N, N))
    return [a, torch.randn(N)]


def get_init_inputs():
    return []
