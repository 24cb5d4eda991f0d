"""Make a small git repository to try `kernelbot review` on: a `main` branch and a `pr` branch that changes it.

    python3 examples/make_demo_repo.py /tmp/kernelbot-demo
    kernelbot review --repo /tmp/kernelbot-demo --base main --head pr --agent search --out comment.md

The operators are this folder's examples at CPU sizes. The `pr` branch slows one down (a second, wasted
GEMM), edits another without changing its speed, touches a third only in a comment, and adds a diagonal-
matrix product that the search agent's `diag-matmul-broadcast` rule rewrites.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CPU_SIZES = {  # the examples are sized for an H200; these keep a CPU review to a minute or two
    "bias_gelu_clamp.py": ("ROWS, FEATURES", "256, 512"),
    "linear_relu_scale.py": ("BATCH, IN_FEATURES, OUT_FEATURES", "128, 256, 256"),
    "rowmean_linear.py": ("BATCH, IN_FEATURES, OUT_FEATURES", "128, 256, 512"),
    "conv_bn_relu.py": ("BATCH, C_IN, C_OUT, SIZE", "2, 16, 32, 16"),
}
CONFIG = """\
# kernelbot settings for a CPU demo: short timing budgets, and a 10% threshold (a shared CPU is noisy).
harness:
  time_budget_s: 1.0
  max_samples: 40
thresholds:
  regression: 0.10
agent:
  budget: 3
"""
DIAG = '''"""Scale the rows of X by v, written as a diagonal-matrix product (KernelBench form)."""

import torch
from torch import nn

N = 1024


class Model(nn.Module):
    def forward(self, v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.diag(v) @ x


def get_inputs():
    return [torch.randn(N), torch.randn(N, N)]


def get_init_inputs():
    return []
'''


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "demo", "GIT_AUTHOR_EMAIL": "demo@example.invalid",
           "GIT_COMMITTER_NAME": "demo", "GIT_COMMITTER_EMAIL": "demo@example.invalid"}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def op_source(name: str) -> str:
    text = (HERE / "ops" / name).read_text()
    names, values = CPU_SIZES[name]
    return re.sub(rf"^{re.escape(names)} = .*$", f"{names} = {values}", text, count=1, flags=re.M)


MARKER = "kernelbot-demo"  # in .git/: a directory this script made, and may make again


def main(target: Path) -> None:
    if target.exists():
        if not (target / ".git" / MARKER).exists() and (not target.is_dir() or any(target.iterdir())):
            sys.exit(f"{target} exists and is not a demo repository made by this script: name a new directory")
        shutil.rmtree(target)
    (target / "ops").mkdir(parents=True)
    (target / ".github").mkdir()
    git(target, "init", "--quiet", "--initial-branch=main")
    (target / ".git" / MARKER).write_text("made by examples/make_demo_repo.py; it replaces this repository\n")
    (target / ".github" / "kernelbot.yml").write_text(CONFIG)
    for name in CPU_SIZES:
        (target / "ops" / name).write_text(op_source(name))
    git(target, "add", "--all")
    git(target, "commit", "--quiet", "-m", "base: four operators")
    git(target, "checkout", "--quiet", "-b", "pr")
    ops = target / "ops"
    slow = ops / "linear_relu_scale.py"
    slow.write_text(slow.read_text().replace("y = self.linear(x)\n", "y = self.linear(x)\n        y = y + 0.0 * self.linear(x)  # a wasted second GEMM\n", 1))
    edited = ops / "rowmean_linear.py"
    edited.write_text(edited.read_text().replace("return", "result =", 1).replace("\n\n\ndef get_inputs", "\n        return result\n\n\ndef get_inputs", 1))
    cosmetic = ops / "bias_gelu_clamp.py"
    cosmetic.write_text(cosmetic.read_text().replace("import torch\n", "import torch  # the only dependency\n", 1))
    (ops / "diag_scale.py").write_text(DIAG)
    git(target, "add", "--all")
    git(target, "commit", "--quiet", "-m", "pr: slow down one op, edit one, comment one, add one")
    git(target, "checkout", "--quiet", "main")
    print(f"demo repository at {target}: branches main and pr")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/kernelbot-demo").resolve())
