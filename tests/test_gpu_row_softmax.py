"""On a CUDA device: rule row-softmax-kernel's kernels against torch.softmax and through the harness.

Run on the GPU machine with `python3 -m pytest -m gpu tests/test_gpu_row_softmax.py`. Speed is measured by
benchmarks/gpu_optimize.py, not here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from kernelbot.harness.evaluate import evaluate
from tests.test_gpu_stacks import FAST, _build

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.fixture(scope="module")
def row_softmax() -> Any:
    _, source = _build("06_softmax.py", "row-softmax-kernel")
    namespace: dict[str, Any] = {}
    exec(compile(source, "candidate", "exec"), namespace)
    return namespace["row_softmax"]


@pytest.mark.parametrize("cols", [4, 1000, 1028, 8192, 16384])  # each kernel width, and rows it pads
@pytest.mark.parametrize("log", [False, True])
def test_row_softmax_matches_torch(row_softmax: Any, cols: int, log: bool) -> None:
    torch.manual_seed(cols)
    x = torch.randn(3, 257, cols, device="cuda") * 10
    x[0, 0, : cols // 2] = float("-inf")  # masked positions, as attention has
    x[0, 1] += 1e4  # large values: the maximum is subtracted first
    got = row_softmax(x, log)
    want = torch.log_softmax(x, -1) if log else torch.softmax(x, -1)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("problem", ["06_softmax.py", "07_log_softmax.py", "32_small_softmax.py"])
def test_row_softmax_candidate_verifies_in_the_harness(tmp_path: Path, problem: str) -> None:
    job, source = _build(problem, "row-softmax-kernel")
    path = tmp_path / "candidate.py"
    path.write_text(source)
    ev = evaluate(job, "candidate", FAST, candidate=str(path))
    assert ev.status == "ok", ev.reason
