"""The GPU pool with fake GPUs (ids only) on the CPU: one job per GPU, base and head on one GPU, jobs of
two processes queueing on a GPU's lock file."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kernelbot.fingerprint import collect
from kernelbot.harness import evaluate
from kernelbot.harness.sandbox import worker_env
from kernelbot.pipeline.pool import Gpu, GpuPool, visible_gpus
from kernelbot.pipeline.review import run_review
from tests.gitrepo_builder import GitRepoBuilder
from tests.ops import FAST_CONFIG


def fake(*ids: str) -> list[Gpu]:
    return [Gpu(i, "Fake GPU") for i in ids]


def overlaps(spans: list[tuple[float, float]]) -> bool:
    spans = sorted(spans)
    return any(b[0] < a[1] for a, b in itertools.pairwise(spans))


def test_two_jobs_never_share_a_gpu(tmp_path: Path) -> None:
    pool = GpuPool(fake("0", "1", "2"), tmp_path / "locks")
    spans: dict[str, list[tuple[float, float]]] = {}
    lock = threading.Lock()

    def job(item: int, gpu: str) -> str:
        begun = time.monotonic()
        time.sleep(0.05)
        with lock:
            spans.setdefault(gpu, []).append((begun, time.monotonic()))
        return f"{item}@{gpu}"

    began = time.monotonic()
    out = pool.map(job, list(range(12)))
    took = time.monotonic() - began
    assert [o.split("@")[0] for o in out] == [str(i) for i in range(12)]  # results in the items' order
    assert set(spans) == {"0", "1", "2"} and sum(len(s) for s in spans.values()) == 12
    assert not any(overlaps(s) for s in spans.values())
    assert took < 12 * 0.05  # side by side: the three GPUs were used at once


def test_jobs_of_two_processes_queue_on_one_gpu(tmp_path: Path) -> None:
    """Another process (a second runner on the machine) holds GPU 1: this job takes GPU 0, then waits."""
    locks = tmp_path / "locks"
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, time; from pathlib import Path; from kernelbot.pipeline.pool import Gpu, GpuPool\n"
            f"pool = GpuPool([Gpu('1', 'Fake GPU')], Path({str(locks)!r}))\n"
            "with pool.acquire():\n    print('held', flush=True); time.sleep(1.0)\n"
        )],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        pool = GpuPool(fake("0", "1"), locks)
        with pool.acquire() as first:
            assert first == "0"  # GPU 1 is locked by the other process
            began = time.monotonic()
            with pool.acquire() as second:
                waited = time.monotonic() - began
            assert second == "1" and waited > 0.3  # queued until the other process let go
    finally:
        holder.wait(timeout=30)
    assert holder.returncode == 0


def test_a_crashed_holder_frees_its_gpu(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    code = (
        "import os; from pathlib import Path; from kernelbot.pipeline.pool import Gpu, GpuPool\n"
        f"pool = GpuPool([Gpu('0', 'Fake GPU')], Path({str(locks)!r}))\n"
        "cm = pool.acquire(); cm.__enter__(); os._exit(9)\n"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 9
    with GpuPool(fake("0"), locks).acquire() as gpu:  # at once: the kernel dropped the dead job's lock
        assert gpu == "0"


def test_the_pool_keeps_one_gpu_model(tmp_path: Path) -> None:
    gpus = [Gpu("a", "NVIDIA H200"), Gpu("b", "NVIDIA A100"), Gpu("c", "NVIDIA H200")]
    pool, note = GpuPool.for_runner({"KERNELBOT_GPU_LOCK_DIR": str(tmp_path)}, gpus)
    assert pool is not None and [g.id for g in pool.gpus] == ["a", "c"]
    assert note is not None and "NVIDIA A100" in note and "never compared" in note
    with pytest.raises(ValueError, match="one GPU model"):
        GpuPool(gpus, tmp_path)
    assert GpuPool.for_runner({}, []) == (None, None)


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda _name: None)  # no nvidia-smi here
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,5"}) == [Gpu("2", "unknown"), Gpu("5", "unknown")]
    assert visible_gpus({}) == []


def test_a_sandbox_sees_only_its_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert worker_env(None, "cuda", "GPU-1234")["CUDA_VISIBLE_DEVICES"] == "GPU-1234"
    assert worker_env(None, "cuda", None)["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"  # no pool: what the runner has


OP = """
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x) * {k}

def get_inputs():
    return [torch.randn(64)]

def get_init_inputs():
    return []
"""


@pytest.mark.slow  # ~30 s; the pool's scheduling tests stay in CI
def test_base_and_head_of_an_operator_share_its_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real review on the CPU with a pool of two fake GPUs: every sandbox of one operator (two a side) was
    given the same GPU, and the two operators ran side by side on different ones."""
    repo = GitRepoBuilder(tmp_path / "repo")
    base = repo.commit(
        {".github/kernelbot.yml": FAST_CONFIG, "ops/a.py": OP.format(k=2), "ops/b.py": OP.format(k=2)}
    )
    head = repo.commit({"ops/a.py": OP.format(k=3), "ops/b.py": OP.format(k=3)})
    seen: list[tuple[str, str, str | None]] = []  # (operator file, base or head worktree, its sandbox's GPU)
    real = evaluate.Handle.__init__

    def recording(self: evaluate.Handle, job: dict[str, Any], subject: str, settings: Any, **kw: Any) -> None:
        seen.append((job["file"], job["root"], settings.gpu))
        real(self, job, subject, settings, **kw)

    monkeypatch.setattr(evaluate.Handle, "__init__", recording)
    pool = GpuPool(fake("0", "1"), tmp_path / "locks")
    review = run_review(repo.root, base, head, collect("cpu"), pool=pool)
    assert [op.name for op in review.operators] == ["ops/a", "ops/b"]
    assert all(op.base and op.base.ok and op.head and op.head.ok for op in review.operators)
    assert len(seen) == 8  # two operators, two sides, two sandboxes a side
    gpus = {file: {gpu for f, _, gpu in seen if f == file} for file, _, _ in seen}
    sides = {file: {root for f, root, _ in seen if f == file} for file, _, _ in seen}
    assert all(len(g) == 1 for g in gpus.values())  # base and head of one operator: one GPU
    assert all(len(r) == 2 for r in sides.values())  # (both sides did run)
    assert {g for (g,) in gpus.values()} == {"0", "1"}  # the two operators: one GPU each, side by side


@pytest.mark.slow  # ~30 s; the pool's scheduling tests stay in CI
def test_the_agent_optimizes_on_a_gpu_of_the_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The optimizer is handed a GPU the pool holds for it (while no other job has it), and the operator's
    baselines in check_operator run on that GPU alone."""
    from kernelbot.config import parse_config
    from kernelbot.pipeline.check import check_operator
    from kernelbot.spec import OperatorSpec

    repo = GitRepoBuilder(tmp_path / "repo")
    base = repo.commit({".github/kernelbot.yml": FAST_CONFIG, "ops/a.py": OP.format(k=2)})
    head = repo.commit({"ops/a.py": OP.format(k=3)})
    pool = GpuPool(fake("5"), tmp_path / "locks")
    given: list[tuple[str, str | None, bool]] = []  # (operator, its GPU, whether that GPU's lock was held)

    from kernelbot.errors import KernelbotError

    def failing(spec: Any, root: Path, config: Any, time_s: float, gpu: str | None = None) -> Any:
        held = gpu is not None and pool._try_lock(gpu) is None
        given.append((spec.name, gpu, held))
        raise KernelbotError("recorded, not run")

    review = run_review(repo.root, base, head, collect("cpu"), pool=pool, optimizer=failing, time_s=600.0)
    assert given == [("ops/a", "5", True)]
    assert review.operators[0].error == "optimization: recorded, not run"

    seen: list[str | None] = []
    real = evaluate.Handle.__init__

    def recording(self: evaluate.Handle, job: dict[str, Any], subject: str, settings: Any, **kw: Any) -> None:
        seen.append(settings.gpu)
        real(self, job, subject, settings, **kw)

    monkeypatch.setattr(evaluate.Handle, "__init__", recording)
    spec = OperatorSpec("ops/a", "kernelbench", "ops/a.py")
    config = parse_config({"harness": {"time_budget_s": 0.2}}, "x")
    report = check_operator(spec, repo.root, config, collect("cpu"), with_compile=False, gpu="5")
    assert report.reference.ok and seen and set(seen) == {"5"}


def test_a_planted_link_in_the_lock_directory_is_never_followed(tmp_path: Path) -> None:
    """The lock directory is shared by the machine's runners: a link where GPU 0's lock belongs is refused in
    one line, and the file it points to is left as it was."""
    from kernelbot.errors import KernelbotError

    locks = tmp_path / "locks"
    locks.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    pool = GpuPool(fake("0"), locks)
    (locks / "gpu-0.lock").symlink_to(victim)
    lock = pool.acquire()
    with pytest.raises(KernelbotError, match=r"cannot take GPU 0's lock .*KERNELBOT_GPU_LOCK_DIR") as err:
        lock.__enter__()
    assert "\n" not in str(err.value) and victim.read_text() == "keep me\n"


@pytest.mark.gpu
def test_on_a_gpu_machine_the_pool_finds_its_gpus_and_an_operator_runs_on_the_one_it_holds(
    tmp_path: Path,
) -> None:
    """nvidia-smi's GPUs (by UUID), one model per pool, and check_operator on CUDA inside the GPU it holds."""
    import os

    from kernelbot.config import parse_config
    from kernelbot.pipeline.check import check_operator
    from kernelbot.spec import OperatorSpec

    gpus = visible_gpus(os.environ)
    assert gpus and all(g.id.startswith("GPU-") and g.model for g in gpus), gpus
    pool, warning = GpuPool.for_runner(os.environ)
    assert pool is not None and warning is None and len(pool) == len(gpus)
    root = tmp_path / "repo"
    root.mkdir()
    (root / "op.py").write_text(OP.format(k=2).replace("torch.randn(64)", "torch.randn(4096, device='cuda')"))
    spec = OperatorSpec("op", "kernelbench", "op.py")
    config = parse_config({"harness": {"time_budget_s": 0.3}}, "x")
    with pool.acquire() as gpu:
        report = check_operator(spec, root, config, collect("cuda"), with_compile=False, gpu=gpu)
    assert report.reference.ok and report.reference.timing is not None, report.reference.reason
