# kernelbot candidate from rule `compile-reduce-overhead`: torch.compile with mode=reduce-overhead (CUDA graphs) for launch-bound operators
# Why it helps: When an operator is many small kernels, launch latency dominates; reduce-overhead records the compiled kernels into a CUDA graph and replays it with one launch. Its outputs are copied out of the graph's memory pool, since the next replay overwrites them (a caller that keeps an output would otherwise read new data).
# The operator's own source follows unchanged; ModelNew compiles its forward with mode="reduce-overhead".
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


def _fresh(out):
    """A clone of a CUDA graph's static output: the next replay overwrites it, the caller keeps its own."""
    if isinstance(out, torch.Tensor):
        return out.clone()
    if isinstance(out, tuple | list):
        return type(out)(_fresh(o) for o in out)
    return out


class ModelNew(Model):
    def forward(self, *args):
        compiled = self.__dict__.get("_kernelbot_compiled")
        if compiled is None:  # compiled once per instance, on the first call (outside the timed region)
            compiled = torch.compile(super().forward, mode="reduce-overhead", fullgraph=False)
            self.__dict__["_kernelbot_compiled"] = compiled
        return _fresh(compiled(*args))  # CUDA-graph outputs live in the graph's pool: hand out copies
