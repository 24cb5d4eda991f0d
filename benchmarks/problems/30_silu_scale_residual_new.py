"""Candidate: SiLU, scale and residual add in one Triton kernel (two reads and one write per element, not seven)."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _silu_scale_add(x_ptr, r_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    r = tl.load(r_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * tl.sigmoid(x) * scale + r, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x, residual = x.contiguous(), residual.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        block = 2048
        _silu_scale_add[(triton.cdiv(n, block),)](x, residual, y, n, self.scale, BLOCK=block, num_warps=8)
        return y
