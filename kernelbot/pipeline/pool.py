"""The GPUs of one runner as a pool: one timed job per GPU at a time, however many jobs share the machine.

A job holds a GPU for a whole operator (base and head are timed on the same GPU, interleaved) and its sandboxes
see that GPU alone (CUDA_VISIBLE_DEVICES). Two jobs on one machine (two runners, or two matrix jobs of a
runner scale set on one node) agree through a lock file per GPU in a machine-wide directory: flock(2) locks
belong to an open file, so they also separate threads of one process, and the kernel drops them when the
process dies however it dies: a crashed job never leaves a GPU locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from kernelbot.errors import KernelbotError

T = TypeVar("T")
R = TypeVar("R")

LOCK_DIR = "/tmp/kernelbot-gpu-locks"  # machine-wide by default: runners of one machine share /tmp
POLL_S = 0.05  # how often a job waiting for a GPU held by another process looks again


class PoolError(KernelbotError):
    """A GPU's lock cannot be taken (the lock directory); one line naming the fix."""


@dataclass(frozen=True)
class Gpu:
    id: str  # what CUDA_VISIBLE_DEVICES takes: an index, or the GPU's UUID (stable across containers)
    model: str  # e.g. "NVIDIA H200": measurements are compared only within one model


def visible_gpus(env: Mapping[str, str]) -> list[Gpu]:
    """The GPUs this process may use: nvidia-smi's, narrowed by CUDA_VISIBLE_DEVICES when set."""
    smi = shutil.which("nvidia-smi")
    found: list[Gpu] = []
    if smi is not None:
        out = subprocess.run(
            [smi, "--query-gpu=index,uuid,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        ).stdout
        rows = [
            [part.strip() for part in line.split(",")] for line in out.splitlines() if line.count(",") >= 2
        ]
        found = [Gpu(uuid, name) for _, uuid, name in rows]
        index = {row[0]: Gpu(row[1], row[2]) for row in rows}
    else:
        index = {}
    wanted = env.get("CUDA_VISIBLE_DEVICES")
    if wanted is None:
        return found
    by_uuid = {g.id: g for g in found}
    out_list = []
    for item in (w.strip() for w in wanted.split(",") if w.strip()):
        gpu = index.get(item) or by_uuid.get(item)
        out_list.append(gpu or Gpu(item, "unknown"))
    return out_list


class GpuPool:
    """GPUs handed out one job at a time, in this process (threads) and across processes (lock files)."""

    def __init__(self, gpus: Sequence[Gpu], lock_dir: Path) -> None:
        if not gpus:
            raise ValueError("a GPU pool needs at least one GPU")
        models = {g.model for g in gpus}
        if len(models) > 1:  # the caller picks one model (same_model): never time across models
            raise ValueError(f"one GPU model per pool, not {', '.join(sorted(models))}")
        self.gpus = list(gpus)
        self.lock_dir = lock_dir
        self._free = {g.id for g in gpus}
        self._cond = threading.Condition()

    @classmethod
    def for_runner(
        cls, env: Mapping[str, str], gpus: Sequence[Gpu] | None = None
    ) -> tuple[GpuPool | None, str | None]:
        """(the pool of this runner's GPUs of the first GPU's model, a warning naming any left out); (None,
        None) when there is no GPU. KERNELBOT_GPU_LOCK_DIR names the lock directory (default LOCK_DIR)."""
        gpus = list(visible_gpus(env) if gpus is None else gpus)
        if not gpus:
            return None, None
        kept, left = same_model(gpus)
        warning = None
        if left:
            warning = (
                f"{len(left)} GPU(s) of another model ({', '.join(sorted({g.model for g in left}))}) not used: "
                f"timings on {kept[0].model} are never compared with another model's"
            )
        return cls(kept, Path(env.get("KERNELBOT_GPU_LOCK_DIR") or LOCK_DIR)), warning

    def __len__(self) -> int:
        return len(self.gpus)

    def _lock_path(self, gpu_id: str) -> Path:
        return self.lock_dir / f"gpu-{''.join(c if c.isalnum() or c in '-_' else '_' for c in gpu_id)}.lock"

    def _try_lock(self, gpu_id: str) -> int | None:
        # The directory is shared by the machine's runners: made sticky and world-writable on purpose (the
        # umask would narrow mkdir's mode), and a lock file is never followed through a link nor written to,
        # so a planted symlink cannot make this job truncate or lock a file of its choosing.
        path = self._lock_path(gpu_id)
        try:
            if not self.lock_dir.is_dir():
                self.lock_dir.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(PermissionError):
                    os.chmod(self.lock_dir, 0o1777)
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise PoolError(
                f"cannot take GPU {gpu_id}'s lock {path}: {exc.strerror}; set KERNELBOT_GPU_LOCK_DIR to a "
                "directory every runner of this machine can write"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    @contextlib.contextmanager
    def acquire(self) -> Iterator[str]:
        """A GPU id held by this job alone until the block ends; waits (queues) while all are busy."""
        while True:
            with self._cond:
                while not self._free:
                    self._cond.wait()
                candidates = [g.id for g in self.gpus if g.id in self._free]
                for gpu_id in candidates:
                    fd = self._try_lock(gpu_id)
                    if fd is not None:
                        self._free.discard(gpu_id)
                        break
                else:
                    fd = None
            if fd is not None:
                break
            time.sleep(POLL_S)  # every free one is locked by another process: queue behind it
        try:
            yield gpu_id
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            with self._cond:
                self._free.add(gpu_id)
                self._cond.notify()

    def map(self, fn: Callable[[T, str], R], items: Sequence[T]) -> list[R]:
        """fn(item, gpu id) for every item, each holding one GPU of the pool for its whole call, as many at a
        time as there are GPUs; results in the items' order."""

        def one(item: T) -> R:
            with self.acquire() as gpu_id:
                return fn(item, gpu_id)

        if len(self.gpus) == 1 or len(items) <= 1:
            return [one(item) for item in items]
        with ThreadPoolExecutor(max_workers=len(self.gpus), thread_name_prefix="kernelbot-gpu") as ex:
            return list(ex.map(one, items))


def same_model(gpus: Sequence[Gpu]) -> tuple[list[Gpu], list[Gpu]]:
    """(the GPUs of the first one's model, the others)."""
    model = gpus[0].model
    return [g for g in gpus if g.model == model], [g for g in gpus if g.model != model]
