"""Attack (a thread through _thread): forward returns a buffer at once; a thread started through the private
_thread module (no threading.Thread, so threading.enumerate never lists it) fills it while the next calls
are timed, and is finished before any guard looks."""

import torch
from torch import nn

_thread = __import__("_" + "thread")


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        _thread.start_new_thread(torch.matmul, (a, b), {"out": out})
        return out
