"""Found by a review of the subject's own thread: the harness's own exception classes pass from the subject's
thread to the main one, and a candidate can raise one itself, holding an object of its own whose __str__ the
main thread would run when it writes the answer (a way back onto the main thread, where round 40 went). The
exception is rebuilt from plain text on the subject's thread now: the text says which thread made it."""

import threading

from torch import nn

from kernelbot.harness.loader import LoadError


class _Said:
    def __str__(self):
        return "made-on-" + threading.current_thread().name


class ModelNew(nn.Module):
    def forward(self, a, b):
        if a._version > 0:  # a timed call
            raise LoadError("candidate", _Said())
        return a @ b
