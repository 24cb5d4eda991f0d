"""A hand-written CUDA operator (csrc/scale_shift.cu, built by CuPy/NVRTC) and its pure-torch reference.

Declared in .github/kernelbot.yml; CUDA only. CuPy is imported on first call, so this module imports
anywhere (discovery, CPU tests) without it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import torch

SOURCE = Path(__file__).resolve().parents[1] / "csrc" / "scale_shift.cu"
THREADS = 256


@cache
def _kernel():
    import cupy

    return cupy.RawModule(code=SOURCE.read_text()).get_function("scale_shift")


def _launch(kernel, grid: int, args: tuple) -> None:
    import cupy

    # torch's current stream, so the kernel is ordered with the torch work around it
    with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
        kernel((grid,), (THREADS,), args)


def scale_shift(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """y = x * scale + shift, scale and shift broadcast over the rows of a 2-D float32 CUDA tensor."""
    import cupy

    if not (x.is_cuda and x.dtype == torch.float32 and x.dim() == 2):
        raise TypeError("scale_shift needs a 2-D float32 CUDA tensor")
    x, scale, shift = x.contiguous(), scale.contiguous(), shift.contiguous()
    y = torch.empty_like(x)
    n, cols = x.numel(), x.shape[1]
    # __cuda_array_interface__: CuPy views the torch memory without a copy
    args = (cupy.asarray(x), cupy.asarray(scale), cupy.asarray(shift), cupy.asarray(y), cupy.int64(n), cupy.int32(cols))
    _launch(_kernel(), (n + THREADS - 1) // THREADS, args)
    return y


def scale_shift_reference(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    return x * scale + shift


def make_inputs(shape: tuple[int, int], dtype: torch.dtype, device: str) -> list[torch.Tensor]:
    rows, cols = shape
    return [torch.randn(rows, cols, dtype=dtype, device=device),
            torch.rand(cols, dtype=dtype, device=device) + 0.5,
            torch.randn(cols, dtype=dtype, device=device)]
