"""Operator and candidate sources shared by the tests (small CPU sizes), and a writer for mini repositories."""

from __future__ import annotations

import textwrap
from pathlib import Path

FAST_CONFIG = """\
harness:
  time_budget_s: 0.3
  max_samples: 20
  timeout_s: 60
"""

LINEAR_RELU = """
import torch

class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = torch.nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.lin(x)) * 2

def get_inputs():
    return [torch.randn(16, 32)]

def get_init_inputs():
    return [32]
"""

# A small KernelBench-form operator for tests that plan candidates from its source (search agent, policy).
TINY_LINEAR_RELU = """import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.lin(x))


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""

LINEAR_RELU_HONEST = """
import torch

class ModelNew(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = torch.nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(torch.addmm(self.lin.bias, x, self.lin.weight.t())).mul_(2)
"""

LINEAR_RELU_WRONG = """
import torch

class ModelNew(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = torch.nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.lin(x)) * 2.001
"""


def matmul_op(repeats: int, size: int = 192, extra: str = "") -> str:
    """A KernelBench operator doing `repeats` n×n matmuls: planted slow-downs and speed-ups by construction."""
    body = "y = x @ self.w" + "".join("\n        y = y + x @ self.w" for _ in range(repeats - 1))
    return f"""
import torch
{extra}
class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(n, n))

    def forward(self, x):
        {body}
        return y

def get_inputs():
    return [torch.randn({size}, {size})]

def get_init_inputs():
    return [{size}]
"""


def diag_op(n: int) -> str:
    """diag(v) @ X at size n: the search agent's diag-matmul-broadcast rule rewrites it (O(n²) for O(n³))."""
    return f"""
import torch

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.diag(A) @ B

N = {n}

def get_inputs():
    return [torch.randn(N), torch.randn(N, N)]

def get_init_inputs():
    return []
"""


def write_repo(root: Path, files: dict[str, str], config: str | None = FAST_CONFIG) -> Path:
    """Write `files` (relative path -> source) under root, plus a fast harness config."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    if config is not None:
        cfg = root / ".github" / "kernelbot.yml"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(config)
    return root
