"""A reduction after a GEMM: the mean over features of x @ W.T, e.g. an average logit (KernelBench form)."""

import torch
from torch import nn

BATCH, IN_FEATURES, OUT_FEATURES = 1024, 1024, 4096


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(self.linear(x), dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
