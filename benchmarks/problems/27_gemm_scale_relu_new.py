"""Candidate: the constant folded into the weight and bias (linear(x)*s = x @ (sW).T + s*b), ReLU in place.

The fold is computed on the first forward (after the harness has loaded the reference's weights)
and again after any state-dict load or device move.
"""

import torch
import torch.nn.functional as F
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self._folded = None
        self.register_load_state_dict_post_hook(lambda module, keys: setattr(module, "_folded", None))

    def _apply(self, fn, *args, **kwargs):
        self._folded = None
        return super()._apply(fn, *args, **kwargs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._folded is None:
            with torch.no_grad():
                self._folded = (self.linear.weight * self.scale, self.linear.bias * self.scale)
        weight, bias = self._folded
        return F.linear(x, weight, bias).relu_()
