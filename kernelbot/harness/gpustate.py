"""What else the GPU is doing while base and head are timed: its clocks and the processes on it.

Read through NVML (the `nvidia-ml-py` package, `pynvml`) by the trusted parent, never by a sandbox: a subject
could fake what it reads itself. measure.run_rounds reads the state after each side's batch and takes a round
again when the clocks moved or a process that is not one of ours appeared on the GPU (docs/measurement.md).
Without NVML (the CPU, a machine without the package) there is nothing to read, and rounds are kept as
timed; the run says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLOCK_TOLERANCE = 0.02  # a clock this far from the run's first reading is a change (boost steps are ~15 MHz)


@dataclass(frozen=True)
class GpuState:
    sm_mhz: int
    mem_mhz: int
    foreign: tuple[int, ...]  # processes using the GPU that are neither this process nor its descendants

    def public(self) -> list[Any]:
        return [self.sm_mhz, self.mem_mhz, list(self.foreign)]


def descendants(root: int) -> set[int]:
    """This process and every process below it (the sandboxes and what they started), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class Monitor:
    """NVML readings of one GPU: the pool's (`gpu`, a UUID or index), else the first one this process sees."""

    def __init__(self, gpu: str | None, processes: bool = True) -> None:
        """`processes` False: clocks only (a container sandbox's processes are not this process's
        descendants, and in another PID namespace NVML names PIDs /proc does not show)."""
        self.note: str | None = None
        self.processes = processes
        self._ours: set[int] = set()
        self._nvml: Any = None
        self._handle: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = self._device(gpu)
        except Exception as exc:  # no package, no driver, no such GPU: rounds are kept as timed
            self.note = f"GPU clocks and processes not read ({type(exc).__name__}: {exc})"[:200]
            self._nvml = None

    def _device(self, gpu: str | None) -> Any:
        nvml = self._nvml
        wanted = gpu or (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip()
        if wanted.startswith("GPU-") or wanted.startswith("MIG-"):
            return nvml.nvmlDeviceGetHandleByUUID(wanted)
        return nvml.nvmlDeviceGetHandleByIndex(int(wanted))

    @property
    def available(self) -> bool:
        return self._nvml is not None

    def read(self) -> GpuState | None:
        if self._nvml is None:
            return None
        nvml = self._nvml
        try:
            sm = int(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM))
            mem = int(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_MEM))
            pids = {int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)}
            if not self.processes:
                pids = set()
            elif pids - self._ours:  # /proc is walked only when NVML names a process not yet known as ours
                self._ours |= descendants(os.getpid())
        except Exception as exc:
            self.note = f"GPU state unreadable ({type(exc).__name__}: {exc})"[:200]
            self._nvml = None
            return None
        return GpuState(sm, mem, tuple(sorted(pids - self._ours)))


def disturbed(state: GpuState, reference: GpuState, foreign_at_start: tuple[int, ...]) -> str | None:
    """Why a round read as `state` must be taken again, or None: clocks moved from the run's first reading, or
    a process that was not on the GPU when the measurement began is on it now (one that was there from the
    start stays: repeating rounds would not make it leave, and the run notes it). run_rounds compares the
    reads after a round's two batches."""
    for name, now, then in (
        ("SM", state.sm_mhz, reference.sm_mhz),
        ("memory", state.mem_mhz, reference.mem_mhz),
    ):
        if then > 0 and abs(now - then) > CLOCK_TOLERANCE * then:
            return f"{name} clock {then} -> {now} MHz"
    new = sorted(set(state.foreign) - set(foreign_at_start))
    if new:
        return f"another process on the GPU (pid {', '.join(map(str, new[:3]))})"
    return None
