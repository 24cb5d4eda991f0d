"""Candidate: row softmax as one Triton kernel, one program per row held in registers (one read, one write)."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _softmax_rows(x_ptr, y_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * stride + offs, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.numel() // x.shape[-1], x.shape[-1]
        y = torch.empty_like(x)
        block = triton.next_power_of_2(cols)
        _softmax_rows[(rows,)](x, y, cols, cols, BLOCK=block, num_warps=16 if block >= 4096 else 4)
        return y
