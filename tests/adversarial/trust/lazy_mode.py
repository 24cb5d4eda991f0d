"""Outputs computed only when the harness copies them (an attacker's find, reward 3 before the fix): forward
returns empty memory, and a torch function mode left on torch's stack computes the product at the first torch
call on that output, which is the worker's copy of it into the shared region, outside every timed window."""
import torch
from torch import nn

_pending = {}  # id(output) -> (output, a, b)


class _Materialise:
    pass


def _handler(self, func, types, args=(), kwargs=None):
    if args and id(args[0]) in _pending:
        out, a, b = _pending.pop(id(args[0]))
        torch.matmul(a, b, out=out)
    return func(*args, **(kwargs or {}))


setattr(_Materialise, "__torch_function__", _handler)
torch._C._push_on_torch_function_stack(_Materialise())


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty(a.shape[0], b.shape[1], device=a.device)
        _pending[id(out)] = (out, a, b)
        return out
