"""The route left open after attacker round 45: for an operator whose inputs the judge draws afresh each
sample (reordering them changes no output), the refresh drew them through the operator's factory on the
worker's main thread, after the sealed check, where a hook in what the factory runs ran too (round 45's
rewrote the sealed server's tail from there). The draw is a job on the subject's thread now, and the modules
the factory runs are watched (round 48), so the hook here hangs on an object the factory calls, which no check
holds: the test's operator draws through MAKER.values. It answers wrongly unless its hook has run, and only
off the main thread."""

import sys
import threading

import torch
from torch import nn

_on_main = []
_maker = sys.modules["kernelbot_operator"].MAKER
_original = _maker.values


def _hook():
    _on_main.append(threading.get_ident() == threading.main_thread().ident)
    return _original()


_maker.values = _hook


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.sort(x.reshape(-1)).values
        return out if _on_main and not any(_on_main) else out + 1
