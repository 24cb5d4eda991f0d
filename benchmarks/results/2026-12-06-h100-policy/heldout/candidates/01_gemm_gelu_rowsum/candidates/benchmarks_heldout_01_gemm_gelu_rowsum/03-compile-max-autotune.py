# kernelbot candidate from rule `compile-max-autotune`: torch.compile with mode=max-autotune-no-cudagraphs
# Why it helps: The baseline torch.compile uses the default mode; max-autotune benchmarks several GEMM and convolution kernels (Triton templates, cuBLAS, cuDNN) for the exact shapes and keeps the fastest, without CUDA graphs.
# The operator's own source follows unchanged; ModelNew compiles its forward with mode="max-autotune-no-cudagraphs".
"""Level 2: Linear, GELU, and the row sums beside the activations (two outputs)."""

import torch
from torch import nn

BATCH, IN_FEATURES, OUT_FEATURES = 512, 2048, 2048


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.nn.functional.gelu(self.linear(x))
        return y, y.sum(dim=1)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]

import torch  # noqa: E402


class ModelNew(Model):
    def forward(self, *args):
        compiled = self.__dict__.get("_kernelbot_compiled")
        if compiled is None:  # compiled once per instance, on the first call (outside the timed region)
            compiled = torch.compile(super().forward, mode="max-autotune-no-cudagraphs", fullgraph=False)
            self.__dict__["_kernelbot_compiled"] = compiled
        return compiled(*args)
