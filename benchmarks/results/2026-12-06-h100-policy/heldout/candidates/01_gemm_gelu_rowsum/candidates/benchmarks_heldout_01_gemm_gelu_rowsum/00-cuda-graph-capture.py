# kernelbot candidate from rule `cuda-graph-capture`: whole-forward CUDA graph: captured once per input signature, replayed with one launch
# Why it helps: A launch-bound operator spends its time in the CPU-side launch of many small kernels, not on the GPU. Capturing the forward once (per static input signature) into a CUDA graph and replaying it costs one launch per call; inputs are copied into the graph's static buffers and the output is cloned, so every call still computes from its own inputs. Exact: the same kernels run on the same data.
# The operator's own source follows unchanged; ModelNew captures its forward in a CUDA graph once per input
# signature (shapes, strides, dtypes, devices, other arguments) and replays it: one launch for the whole forward.
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


def _signature(args):
    return tuple(
        (tuple(a.shape), a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor) else (type(a), repr(a))
        for a in args
    )


def _fresh(out):
    """A clone of a CUDA graph's static output: the next replay overwrites it, the caller keeps its own."""
    if isinstance(out, torch.Tensor):
        return out.clone()
    if isinstance(out, tuple | list):
        return type(out)(_fresh(o) for o in out)
    return out


class ModelNew(Model):
    def forward(self, *args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if (
            not tensors
            or not all(t.is_cuda for t in tensors)
            or (torch.is_grad_enabled() and any(p.requires_grad for p in self.parameters()))
            or torch.cuda.is_current_stream_capturing()
        ):
            return super().forward(*args)  # a graph replays fixed work: no autograd, no nested capture
        graphs = self.__dict__.setdefault("_kernelbot_graphs", {})
        key = _signature(args)
        entry = graphs.get(key)
        if entry is None:  # first call with this signature: warm up, then capture (outside the timed region)
            static_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            for _ in range(2):  # lazy init (cuBLAS/cuDNN handles, plans) before capture
                super().forward(*static_args)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):  # torch captures on its own internal stream and waits for it
                static_out = super().forward(*static_args)
            entry = graphs[key] = (graph, static_args, static_out)
        graph, static_args, static_out = entry
        for dst, src in zip(static_args, args):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        graph.replay()
        return _fresh(static_out)
