"""On a CUDA device: the hidden-work check tells a side stream from a loaded runner (run on the GPU machine).

Run 3 and 4 on the H200 saw the operators themselves rejected as "work on another stream" while 21 jobs shared
16 cores. A sample's wall time far above its events' time now counts as hidden work only if the process held
the CPU meanwhile; a descheduled sample is taken again, or counts its wall time.
Run with `python3 -m pytest -m gpu tests/test_gpu_timing.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kernelbot.harness.evaluate import Settings, evaluate
from kernelbot.spec import kernelbench_spec

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
REPO = Path(__file__).resolve().parents[1]
PROBLEMS = REPO / "benchmarks" / "problems"
SETTINGS = Settings(timeout_s=300.0, time_budget_s=1.0, max_samples=30)


def _job() -> dict:
    return kernelbench_spec("31_small_matmul.py").job(PROBLEMS, "cuda")


def test_a_side_stream_is_never_timed_as_fast() -> None:
    """H200, 2026-11-30 (protocol 2): this cheat was timed "ok" at about 0.02 ms against the product's 0.065 ms;
    the likely gap: the verdict's margin (1.5x + 0.5 ms) is half a 1 ms sample. Now a sample counts at least its
    wall time less the host latency (timing.counted_ms): rejected, or timed like the product itself."""
    cheat = REPO / "tests" / "adversarial" / "cheats" / "side_stream.py"
    ev = evaluate(_job(), "candidate", SETTINGS, candidate=str(cheat), static_check=False)
    if ev.status == "rejected":
        assert "anti-hack" in ev.reason
        return
    assert ev.status == "ok" and ev.timing is not None, ev.reason
    eager = evaluate(_job(), "eager", SETTINGS)
    assert eager.timing is not None, eager.reason
    assert ev.timing.median_ms > eager.timing.median_ms / 1.05, (ev.timing, eager.timing)
    # Caught by the judge's wall time (wall_bound > 0) or by the subject's own timer, whose sample ends with a
    # device-wide sync: on an H100 at the subject's own thread (2026-12-07) no sample was wall-bound, 0.100 ms.


@pytest.fixture
def one_busy_core() -> Iterator[None]:
    """This process and its sandboxes on one core, with three busy loops on it too."""
    core = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    spin = f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(3)]
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
        for hog in hogs:
            hog.kill()


def test_an_honest_operator_on_a_loaded_runner_is_not_hidden_work(one_busy_core: None) -> None:
    ev = evaluate(_job(), "eager", SETTINGS)
    assert ev.status == "ok", ev.reason
