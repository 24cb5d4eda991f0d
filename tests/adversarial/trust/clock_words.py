"""A failure dressed as the run's deadline (a reviewer's find): an exception class named `stopped`, raised
with the text of the harness's out-of-time reason, past the worker's `except Exception`. Judged by its
reason alone it was 'cut by the clock', not failed: it kept a provisional reward instead of -1."""

import torch
from torch import nn


class stopped(BaseException):  # noqa: N801, N818 (the name is the attack)
    pass


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        raise stopped("the run's time limit (--time) ran out")
