"""A review's find after attacker round 41: the Subject's own objects that the worker's main thread uses.

A timed call finds the Subject on its thread's stack (Subject.go's frame, through a trampoline of torch's:
known; after the timing's set-up, whose own guard runs on the subject's thread) and changes what the main thread later runs through it, each MODE one way:
- "getter": the guard's Integrity kept its getters in an instance dict; a getter of the candidate's there
  ran on the main thread at the next guard (`subject.guard()` after a checked call).
- "factory": the factory a refresh drawing inputs afresh calls on the main thread is a closure whose cells
  anyone holding it can rewrite (no audit event).
Each function of the candidate's put there raises with the name of the thread it ran on."""

import sys

import torch
import torch.utils._pytree as pytree
from torch import nn

MODE = ""
DONE = []


def _spy(*args, **kwargs):
    import threading

    raise RuntimeError("ran-on-" + threading.current_thread().name)


def _subject():
    frame = pytree.tree_map(sys._getframe, 0)
    while frame is not None:
        seen = frame.f_locals
        if type(seen.get("self")).__name__ == "Subject" and "drop" in seen:  # Subject.go
            return seen["self"]
        frame = frame.f_back
    return None


def _reach() -> None:
    subject = _subject()
    if subject is None:
        return
    DONE.append(1)
    if MODE == "getter":
        integrity = subject.integrity
        integrity._getters = {"torch.randn": _spy}
    elif MODE == "factory":
        for cell in subject.factory.__closure__:
            if callable(cell.cell_contents):
                cell.cell_contents = _spy


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if not DONE:
            _reach()
        return a @ b
