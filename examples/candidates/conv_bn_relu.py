"""Candidate: BatchNorm (eval) folded into the convolution's weight and bias, then ReLU in place.

The module keeps the reference's parameter names (conv.*, bn.*), so the harness hands it the same
weights and statistics; the fold runs on the first forward and again whenever a state dict is loaded.
"""

import torch
import torch.nn.functional as F
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(c_out)
        self._folded: tuple[torch.Tensor, torch.Tensor] | None = None
        self.register_load_state_dict_post_hook(lambda module, keys: module._invalidate())

    def _invalidate(self) -> None:
        self._folded = None

    def _apply(self, fn, *args, **kwargs):  # .to(device) etc. must not leave a fold on the old device
        self._folded = None
        return super()._apply(fn, *args, **kwargs)

    @torch.no_grad()
    def _fold(self) -> tuple[torch.Tensor, torch.Tensor]:
        bn, conv = self.bn, self.conv
        factor = bn.weight * torch.rsqrt(bn.running_var + bn.eps)  # per output channel
        weight = conv.weight * factor.view(-1, 1, 1, 1)
        bias = (conv.bias - bn.running_mean) * factor + bn.bias
        return weight.contiguous(), bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:  # batch statistics cannot be folded
            return torch.relu(self.bn(self.conv(x)))
        if self._folded is None:
            self._folded = self._fold()
        weight, bias = self._folded
        return F.conv2d(x, weight, bias, padding=1).relu_()
