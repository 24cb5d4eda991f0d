"""Conv 64 -> 128 (3x3), BatchNorm (eval), ReLU at batch 32, 224^2: BatchNorm folds into the conv."""

import torch
from torch import nn

B, C_IN, C_OUT, H = 32, 64, 128, 224


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        with torch.no_grad():
            self.bn.running_mean.normal_(0, 0.1)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(B, C_IN, H, H)]


def get_init_inputs():
    return [C_IN, C_OUT]
