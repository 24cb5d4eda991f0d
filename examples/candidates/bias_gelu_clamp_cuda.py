"""Candidate (device=cuda only): the whole chain as one CUDA kernel, one read and one write per element.

Built with CuPy (NVRTC) on first use; there is no CPU path on purpose.
"""

import cupy
import torch
from torch import nn

_SOURCE = r"""
extern "C" __global__ void bias_gelu_clamp(const float* __restrict__ x, const float* __restrict__ scale,
                                           const float* __restrict__ bias, float* __restrict__ y,
                                           long long n, int features, float lo, float hi) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        int j = (int)(i % features);
        float v = x[i] * scale[j] + bias[j];
        v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
        y[i] = fminf(fmaxf(v, lo), hi);
    }
}
"""
_kernel = None


def _get_kernel():
    global _kernel
    if _kernel is None:
        _kernel = cupy.RawKernel(_SOURCE, "bias_gelu_clamp")
    return _kernel


class ModelNew(nn.Module):
    def __init__(self, features: int, lo: float, hi: float) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.rand(features) + 0.5)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.lo, self.hi = lo, hi

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_cuda or x.dtype != torch.float32:
            raise TypeError("this candidate runs float32 CUDA tensors only")
        x = x.contiguous()
        y = torch.empty_like(x)
        n, features = x.numel(), x.shape[-1]
        threads = 256
        blocks = min((n + threads - 1) // threads, 132 * 32)
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        with stream:  # launch on torch's stream so ordering with torch's own work holds
            _get_kernel()((blocks,), (threads,),
                          (cupy.asarray(x), cupy.asarray(self.scale.detach()), cupy.asarray(self.bias.detach()),
                           cupy.asarray(y), cupy.int64(n), cupy.int32(features),
                           cupy.float32(self.lo), cupy.float32(self.hi)))
        return y
