"""A garbage-collector callback: it runs inside whichever harness step happens to allocate (the input
refresh between samples among them), where a sample's work would go unclocked. Its callback is harmless
here: only whether the harness lets it stay is in question."""
import gc

from torch import nn

_seen = []


def _callback(phase, info):
    _seen.append(phase)


class ModelNew(nn.Module):
    def forward(self, a, b):
        if _callback not in gc.callbacks:
            gc.callbacks.append(_callback)
        return a @ b
