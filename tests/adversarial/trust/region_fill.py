"""Attack: take host memory through the shared output region (fallocate on its fd), where no RLIMIT_AS counts
it and the OOM killer would see it in no process's size."""

import os
import sys

import torch
from torch import nn


def _fill():
    region = int(sys.argv[3])  # the worker's third argument: the region's descriptor
    os.posix_fallocate(region, 1 << 29, 64 << 20)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _fill()

    def forward(self, a, b):
        return torch.matmul(a, b)
