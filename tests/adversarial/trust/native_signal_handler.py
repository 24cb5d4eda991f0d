"""Attacker round 58's means without a C build: a signal handler installed below Python (faulthandler's, by
sigaction), which `signal.getsignal` does not show. The round's own handler, driven by POSIX timers from a
load_inline extension, ran code on its own clock with no thread or process for the guard to count; the
guard now compares the kernel's mask of caught signals and the process's timers with their state at load."""
import faulthandler
import signal

from torch import nn

faulthandler.register(signal.SIGUSR1)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
