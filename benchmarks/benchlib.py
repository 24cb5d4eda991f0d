"""What the GPU scripts share: the environment record (kernelbot's own fingerprint plus tool versions), a
timestamped log, the Wilson interval of a rate, and the table printer."""

from __future__ import annotations

import datetime
import math
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from kernelbot.fingerprint import collect


def cmd(args: list[str]) -> str | None:
    """A command's stdout, or None when the tool is missing or fails (nvcc, nvidia-smi)."""
    if shutil.which(args[0]) is None:
        return None
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=20).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


SMI_QUERY = (
    "name,driver_version,memory.total,clocks.sm,clocks.max.sm,persistence_mode,power.limit,temperature.gpu"
)


def environment(device: str) -> dict[str, Any]:
    """kernelbot's fingerprint (the same one results are keyed by) plus what a reader of a table wants to know."""
    import torch  # versions only: the parent never initialises CUDA

    fp = collect(device)
    env: dict[str, Any] = {
        **fp.to_dict(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if device == "cuda" else None,
        "cpu_count": os.cpu_count(),
    }
    nvcc = cmd(["nvcc", "--version"])
    env["nvcc"] = nvcc.splitlines()[-1] if nvcc else None
    smi = (
        cmd(["nvidia-smi", f"--query-gpu={SMI_QUERY}", "--format=csv,noheader"]) if device == "cuda" else None
    )
    if smi:
        env["nvidia_smi"] = smi
        env["gpus"] = [
            dict(zip(SMI_QUERY.split(","), (v.strip() for v in line.split(",")), strict=False))
            for line in smi.splitlines()
        ]
    return env


class Log:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def line(self, text: str) -> None:
        print(f"[{time.monotonic() - self.start:6.1f}s] {text}", flush=True)


def commit(root: Path, files: dict[str, str | None], message: str) -> str:
    """Write `files` into the git repository at `root` (made if new; None deletes) and commit them; the SHA.
    Author and dates are pinned and no user git config is read, so runs on any machine make the same tree."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    env |= {f"GIT_{who}_{part}": value for who in ("AUTHOR", "COMMITTER")
            for part, value in (("NAME", "kernelbot-bench"), ("EMAIL", "bench@kernelbot.invalid"))}  # fmt: skip

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True
        ).stdout

    if not (root / ".git").exists():
        root.mkdir(parents=True, exist_ok=True)
        git("init", "--quiet", "--initial-branch=main")
    for name, text in files.items():
        path = root / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    git("add", "--all")
    git("commit", "--quiet", "--no-gpg-sign", "-m", message)
    return git("rev-parse", "HEAD").strip()


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a rate k/n (honest at n = 20 and k = 0)."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    """A rich table on stdout (plain columns where rich is missing); the last thing a script prints."""
    if not rows:
        return
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
        print(f"\n{title}")
        for row in [header, *rows]:
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)))
        return
    table = Table(title=title)
    for name in header:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*[str(c) for c in row])
    Console(width=200).print(table)
