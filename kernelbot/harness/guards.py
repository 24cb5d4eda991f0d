"""Worker side: what untrusted code must leave as it found it (timers, sync, precision flags, threads)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import torch


def _watched() -> dict[str, Callable[[], Any]]:
    """Name -> getter of each object a candidate could patch to fake its timing or correctness."""
    watched: dict[str, Callable[[], Any]] = {
        "time.perf_counter_ns": lambda: time.perf_counter_ns,
        "time.perf_counter": lambda: time.perf_counter,
        "time.monotonic": lambda: time.monotonic,
        "torch.cuda.synchronize": lambda: torch.cuda.synchronize,
        "torch.cuda.Event": lambda: torch.cuda.Event,
        "torch.cuda.Event.record": lambda: torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": lambda: torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": lambda: torch.cuda.Event.synchronize,
        "torch.Tensor": lambda: torch.Tensor,
        "torch.Tensor.__sub__": lambda: torch.Tensor.__sub__,
        "torch.equal": lambda: torch.equal,
        "torch.allclose": lambda: torch.allclose,
        "torch.isnan": lambda: torch.isnan,
        "torch.abs": lambda: torch.abs,
        "torch.manual_seed": lambda: torch.manual_seed,
        "torch.randn": lambda: torch.randn,
        "torch.rand": lambda: torch.rand,
        "torch.Tensor.clone": lambda: torch.Tensor.clone,
    }
    return watched


def precision_flags() -> dict[str, Any]:
    return {
        "matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "matmul.allow_fp16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "matmul.allow_bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    }


def pin_precision(allow_tf32: bool) -> None:
    """The same flags on every side; TF32 only where the operator's policy allows it."""
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.allow_tf32 = allow_tf32
    torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")


def child_processes() -> list[int]:
    pids: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as handle:
                pids += [int(p) for p in handle.read().split()]
    except OSError:
        pass
    return pids


class Integrity:
    """A snapshot taken before candidate code is imported, verified after every command."""

    def __init__(self) -> None:
        self._getters = _watched()
        self._identity = {name: get() for name, get in self._getters.items()}
        self._flags = precision_flags()
        self._threads = {t.ident for t in threading.enumerate()}
        self._children = set(child_processes())

    def rebase_threads(self) -> None:
        """Accept threads started by trusted code (torch.compile, CUDA init) before the candidate runs."""
        self._threads = {t.ident for t in threading.enumerate()}
        self._children = set(child_processes())

    def violations(self) -> list[str]:
        found = []
        for name, get in self._getters.items():
            try:
                if get() is not self._identity[name]:
                    found.append(f"{name} was replaced")
            except AttributeError:
                found.append(f"{name} was removed")
        flags = precision_flags()
        for key, value in self._flags.items():
            if flags[key] != value:
                found.append(f"precision flag {key} changed from {value} to {flags[key]}")
        new_threads = [t.name for t in threading.enumerate() if t.ident not in self._threads and t.is_alive()]
        if new_threads:
            found.append(f"started threads that outlive the call: {', '.join(new_threads)}")
        new_children = set(child_processes()) - self._children
        if new_children:
            found.append(f"started {len(new_children)} child process(es)")
        return found
