"""A thread no Python object stands for: a task forked from TorchScript runs on torch's inter-op pool, and a
@torch.jit.ignore function inside it runs ordinary Python there (attacker round 7 computed each input set's
answer on the second core while the refresh wrote the next, for reward 3). Here it only starts the pool."""
import torch
from torch import nn
from torch.jit._async import fork


@torch.jit.ignore
def _work(k: int) -> int:
    return k + 1


@torch.jit.script
def _task(k: int) -> int:
    return _work(k)


@torch.jit.script
def _start(k: int) -> int:
    return torch.jit.wait(fork(_task, k))


class ModelNew(nn.Module):
    def forward(self, a, b):
        _start(1)
        return a @ b
