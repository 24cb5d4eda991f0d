"""On a CUDA device: the comparison's block-by-block scale rule and its float64 rescue on CUDA tensors (the
block sums are joined on the CPU). Run on the GPU machine with `python3 -m pytest -m gpu
tests/test_gpu_compare.py`."""

from __future__ import annotations

import pytest
import torch

from kernelbot.harness import compare

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def test_a_region_below_atol_is_found_on_cuda_and_rounding_passes() -> None:
    gen = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(1024, 256, generator=gen, device="cuda", dtype=torch.float64)
    w = torch.randn(256, 256, generator=gen, device="cuda", dtype=torch.float64) / 16
    decay = 0.9 ** torch.arange(1024, dtype=torch.float64, device="cuda")
    golden = (x @ w) * decay[:, None]
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = (x.float() @ w.float()) * decay.float()[:, None]
    other = (x.float() * decay.float()[:, None]) @ w.float()
    zeros = ref.clone()
    zeros[160:] = 0
    with pytest.raises(
        compare.Mismatch, match=r"over its elements \[160, 0\].*float64 rule over each such run"
    ):
        compare.compare(zeros, ref, None, None, compare.Golden(lambda: [golden]))
    compare.compare(other, ref, None, None, compare.Golden(lambda: [golden]))
