"""On a CUDA device: float32 products emulated on TF32 Tensor Cores (rule tf32x3-matmul).

Run on the GPU machine with `python3 -m pytest -m gpu tests/test_gpu_tf32x3.py`. Speed is measured by
benchmarks/gpu_optimize.py, not here. On the H200 (2026-11-30) the emulation removed TF32's operand rounding
but not the Tensor Cores' accumulation error, which grows with the inner dimension: the harness's float32
tolerance passed it on 02 (K = 256) and on 27's nn.Linear (K = 4096 at Linear's scale), and refused it on
01 (K = 3072, unit normal operands).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from kernelbot.agents.base import job_at_precision
from kernelbot.harness.evaluate import evaluate
from tests.test_gpu_stacks import FAST, _build

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize(
    ("problem", "wrapper", "status"),
    [
        ("02_tall_skinny_matmul.py", None, "ok"),
        ("27_gemm_scale_relu.py", None, "ok"),
        ("27_gemm_scale_relu.py", "compile-max-autotune", "ok"),
        ("01_square_matmul.py", None, "incorrect"),  # a long product of raw values: held to 1e-4, refused
    ],
)
def test_tf32x3_is_held_to_the_float32_tolerance(
    tmp_path: Path, problem: str, wrapper: str | None, status: str
) -> None:
    job, source = _build(problem, "tf32x3-matmul", wrapper)
    path = tmp_path / "candidate.py"
    path.write_text(source)
    ev = evaluate(job_at_precision(job, "tf32x3"), "candidate", FAST, candidate=str(path))
    assert ev.status == status, ev.reason


def test_tf32x3_error_is_far_below_tf32s(tmp_path: Path) -> None:
    _, source = _build("01_square_matmul.py", "tf32x3-matmul")
    namespace: dict[str, Any] = {}
    exec(compile(source, "candidate", "exec"), namespace)
    torch.manual_seed(0)
    a, b = torch.randn(2048, 2048, device="cuda"), torch.randn(2048, 2048, device="cuda")
    truth = a.double() @ b.double()
    with torch.no_grad():
        fp32 = (namespace["Model"]()(a, b).double() - truth).abs().max().item()
        emulated = (namespace["ModelNew"]()(a, b).double() - truth).abs().max().item()
        assert not torch.backends.cuda.matmul.allow_tf32  # switched on inside the product only
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            tf32 = ((a @ b).double() - truth).abs().max().item()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
    print(f"max abs error vs float64: IEEE float32 {fp32:.3g}, tf32x3 {emulated:.3g}, TF32 {tf32:.3g}")
    # Measured on the H200: IEEE float32 4.7e-4, tf32x3 5.0e-3, TF32 6.7e-2.
    assert tf32 > 5 * emulated
