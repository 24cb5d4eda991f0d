"""The subject's thread hands its answers back through a lock and a list that its loop (worker._serve) holds as
locals, and a frame got through a trampoline of torch's reaches that loop. This candidate, once timed (its
inputs' version above 0), puts a forged answer of its own in the list and releases the lock from inside its
call: the main thread would then answer the judge (a sample of nearly nothing) while the candidate's call goes
on computing on its thread, past the judge's clock and beside the sealed copy. The main thread now checks that
the subject's thread is back in its loop before it takes an answer."""

import sys

import torch
import torch.utils._pytree as pytree
from torch import nn

_done = []


def _loop_locals():
    frame = pytree.tree_map(sys._getframe, [0])[0]
    while frame is not None:  # f_back and f_locals raise no audit event
        names = frame.f_locals
        if "box" in names and "done" in names and "go" in names:
            return names
        frame = frame.f_back
    return None


class ModelNew(nn.Module):
    def forward(self, a, b):
        if a._version > 0 and not _done:
            names = _loop_locals()
            if names is not None:
                _done.append(1)
                names["box"].append(((True, {"ms_total": 1e-6, "descheduled": False, "hidden": False}), False))
                names["done"].release()
        return torch.matmul(a, b)
