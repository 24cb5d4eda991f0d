"""An interval timer and a handler for its signal: the handler runs between two bytecodes of whatever the
subject process is doing when the timer fires, the input refresh between samples among them, where a
sample's work would go unclocked. Its handler is harmless here: only whether the harness lets it stay is in
question."""
import signal

from torch import nn

_ticks = []


def _tick(number, frame):
    _ticks.append(number)


class ModelNew(nn.Module):
    def forward(self, a, b):
        if signal.getsignal(signal.SIGALRM) is not _tick:
            signal.signal(signal.SIGALRM, _tick)
            signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
        return a @ b
