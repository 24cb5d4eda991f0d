"""Candidate for the declared operator scale_shift: float4 loads and stores, grid-stride loop.

Source: csrc/scale_shift_vec4.cu. Falls back to that file's scalar kernel (not to torch) when the
row length is not a multiple of 4 or a pointer is not 16-byte aligned.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import cupy
import torch

SOURCE = Path(__file__).resolve().parents[1] / "csrc" / "scale_shift_vec4.cu"
THREADS = 256


@cache
def _module():
    return cupy.RawModule(code=SOURCE.read_text())


@cache
def _max_blocks() -> int:
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count * 8


def scale_shift(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    if not (x.is_cuda and x.dtype == torch.float32 and x.dim() == 2):
        raise TypeError("scale_shift needs a 2-D float32 CUDA tensor")
    x, scale, shift = x.contiguous(), scale.contiguous(), shift.contiguous()
    y = torch.empty_like(x)
    n, cols = x.numel(), x.shape[1]
    vec = cols % 4 == 0 and x.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0
    items = n // 4 if vec else n
    grid = max(1, min((items + THREADS - 1) // THREADS, _max_blocks()))
    kernel = _module().get_function("scale_shift_vec4" if vec else "scale_shift_scalar")
    args = (cupy.asarray(x), cupy.asarray(scale), cupy.asarray(shift), cupy.asarray(y),
            cupy.int64(items), cupy.int32(cols))
    with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
        kernel((grid,), (THREADS,), args)
    return y
