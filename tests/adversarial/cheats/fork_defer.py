"""Cheat (defer to a forked child): the child computes into shared memory after the parent returned."""

import os

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype).share_memory_()
        if os.fork() == 0:
            try:
                torch.matmul(a, b, out=out)
            finally:
                os._exit(0)
        return out
