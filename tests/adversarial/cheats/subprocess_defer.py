"""Cheat (defer to a subprocess): hands the work to a helper process that outlives the timed call."""

import subprocess
import sys

from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.helpers = []

    def forward(self, a, b):
        # stands for "ship the inputs to a process that computes off the clock"
        self.helpers.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"]))
        return a @ b
