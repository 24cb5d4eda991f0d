"""Cheat (tensor subclass via as_subclass): the output is not a plain torch.Tensor."""

import torch
from torch import nn


class Marked(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def forward(self, a, b):
        return (a @ b).as_subclass(Marked)
