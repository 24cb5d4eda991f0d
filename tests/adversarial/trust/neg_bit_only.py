"""A neg bit left on an input by a timed call, with no kernel of the subject's: the next refresh's calls on
that input would dispatch through the Negative key (round 24 put its work there). Its outputs are honest:
only whether the refresh takes such an input is in question."""
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        torch._C._set_neg(b, False)
        out = torch.mm(a, b)
        torch._C._set_neg(b, True)
        return out
