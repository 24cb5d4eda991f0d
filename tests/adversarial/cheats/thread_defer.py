"""Cheat (defer to a thread): returns an output buffer at once and fills it from a thread after the timer stopped."""

import threading
import time

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)

        def later():
            time.sleep(0.05)
            torch.matmul(a, b, out=out)

        threading.Thread(target=later, daemon=True).start()
        return out
