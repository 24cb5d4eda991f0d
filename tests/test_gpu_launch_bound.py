"""The analysis measures how busy the GPU is during eager calls (tracer.gpu_busy_share): many tiny kernels
leave it mostly idle, one large product keeps it busy. Run on the GPU machine (-m gpu)."""

from __future__ import annotations

import pytest
import torch

from kernelbot.analysis.tracer import gpu_busy_share

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


class ManyTiny(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(200):
            x = x + 1.0
        return x


class OneProduct(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def test_launch_bound_and_busy_operators_are_told_apart() -> None:
    tiny = gpu_busy_share(ManyTiny(), [torch.randn(64, device="cuda")])
    busy = gpu_busy_share(OneProduct(), [torch.randn(8192, 8192, device="cuda")] * 2)
    assert tiny is not None and busy is not None
    assert tiny < 0.5 < 0.8 < busy, (tiny, busy)
