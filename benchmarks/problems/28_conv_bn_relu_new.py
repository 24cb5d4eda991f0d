"""Candidate: BatchNorm (eval) folded into the convolution, ReLU in place; the fold is cached after the first call."""

import torch
import torch.nn.functional as F
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(c_out)
        self._folded = None
        self.register_load_state_dict_post_hook(lambda module, keys: setattr(module, "_folded", None))

    def _apply(self, fn, *args, **kwargs):
        self._folded = None
        return super()._apply(fn, *args, **kwargs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._folded is None:
            with torch.no_grad():
                bn = self.bn
                factor = bn.weight * torch.rsqrt(bn.running_var + bn.eps)
                weight = (self.conv.weight * factor.view(-1, 1, 1, 1)).contiguous()
                bias = (self.conv.bias - bn.running_mean) * factor + bn.bias
                self._folded = (weight, bias)
        weight, bias = self._folded
        return F.conv2d(x, weight, bias, padding=1).relu_()
