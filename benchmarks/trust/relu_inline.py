"""Candidate: ReLU as a CUDA extension built by torch.utils.cpp_extension.load_inline (nvcc, ninja)."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long long n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
_ext = load_inline(
    name="relu_inline_ext",
    cpp_sources="torch::Tensor relu(torch::Tensor x);",
    cuda_sources=_CUDA,
    functions=["relu"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu(x.contiguous())
