# Drop-in replacement for gemm_gelu_scale_clamp.py (gemm_gelu_scale_clamp), found by kernelbot.
# What it does: bfloat16 autocast around forward, output cast back (where the precision policy allows) (rule/model: bf16-autocast; uses bf16 precision).
# How it was verified: correct against the operator on 1 input case(s) x fresh random seeds
# (max abs err 0.00721), deterministic, timed outputs re-checked; reward 2.
# Timing on NVIDIA H200 (cuda, torch 2.11.0+cu130):
#   eager 0.348 ms, candidate 0.2927 ms (1.19x), torch.compile 0.275 ms (0.94x).
# It needs only torch (no kernelbot); ModelNew takes the same constructor arguments as Model.
# kernelbot candidate from rule `bf16-autocast`: bfloat16 autocast around forward, output cast back (where the precision policy allows)
# Why it helps: Autocast runs matmuls and convolutions in bfloat16 (Tensor Cores on GPU, AMX/AVX512-BF16 on recent CPUs) and keeps precision-sensitive ops (reductions, softmax, norms) in float32: half the bytes and several times the matmul throughput, with about 1e-2 relative error. Only where the operator's policy allows it.
# Precision: bfloat16 autocast (8-bit mantissa) in matmuls and convolutions; allowed by this operator's precision policy.
# The operator's own source follows unchanged; floating outputs are cast back to the dtype the operator returns.
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, k, n, scale):
        super(Model, self).__init__()
        self.lin = nn.Linear(k, n)
        self.scale = scale

    def forward(self, x):
        y = F.gelu(self.lin(x)) * self.scale
        return torch.clamp(y + 0.1, min=-0.5, max=0.5)

def get_inputs():
    return [torch.randn(4096, 2048)]

def get_init_inputs():
    return [2048, 4096, 0.75]

import torch  # noqa: E402


def _cast(out, dtype):
    if isinstance(out, torch.Tensor):
        return out.to(dtype) if out.is_floating_point() and out.dtype != dtype else out
    if isinstance(out, tuple | list):
        return type(out)(_cast(o, dtype) for o in out)
    return out


class ModelNew(Model):
    def forward(self, *args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        device = "cuda" if any(t.is_cuda for t in tensors) else "cpu"
        floats = {t.dtype for t in tensors if t.is_floating_point()}
        # Without autocast the operator returns its inputs' floating dtype (float32 when there is none or a mix).
        dtype = floats.pop() if len(floats) == 1 else torch.float32
        with torch.autocast(device, dtype=torch.bfloat16):
            out = super().forward(*args)
        return _cast(out, dtype)
