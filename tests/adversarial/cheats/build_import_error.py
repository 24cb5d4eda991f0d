"""Build error (import of a module that does not exist)."""

import fused_matmul_ext_that_was_never_built  # noqa: F401
from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
