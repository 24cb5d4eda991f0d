"""Cheat (precision flags at import): turns on TF32 for matmul and cuDNN where the policy does not allow it."""

import torch
from torch import nn

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
