"""Cheat (cache keyed on a content hash): a cheap, order-blind statistic of the inputs picks a cached answer.
Each sample's values are drawn anew from the master's, so an exact statistic (a sum) no longer repeats; a
coarse one (the mean magnitude to one decimal) still does, and answers with another sample's product."""

from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, a, b):
        key = (round(float(a.abs().mean()), 1), round(float(b.abs().mean()), 1), tuple(a.shape), tuple(b.shape))
        if key not in self.cache:
            self.cache[key] = a @ b
        return self.cache[key]
