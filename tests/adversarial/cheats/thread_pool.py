"""Cheat (defer to a thread pool): work is submitted to a pool and the call returns without waiting."""

from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn

_pool = ThreadPoolExecutor(max_workers=2)


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        _pool.submit(torch.matmul, a, b, out=out)
        return out
