"""Attack: a frame from a signal handler (no audited call), the harness's timer patched on its instance to
report a nanosecond per call while the work is still done: only a clock outside the process can see it."""

import signal

import torch
from torch import nn

_patched = []


def _handler(signum, frame):
    while frame is not None and not _patched:
        for value in list(frame.f_locals.values()):
            timer = getattr(value, "timer", None)
            if timer is not None and hasattr(timer, "one_sample") and not _patched:
                real = timer.one_sample

                def fake(fn, sets, calls, real=real):
                    _, outputs = real(fn, sets, calls)
                    return 1e-9, outputs

                timer.one_sample = fake
                _patched.append(timer)
        frame = frame.f_back


signal.signal(signal.SIGALRM, _handler)
signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)


class ModelNew(nn.Module):
    def forward(self, a, b):
        if _patched:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
        return torch.matmul(a, b)
