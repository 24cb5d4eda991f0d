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
        ("34_mlp_small_batch.py", None, "ok"),
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


@pytest.mark.parametrize("shape", [(3, 64, 10), (2, 6, 5), (7,)])  # inner % 4 == 0: the kernel; else PyTorch
@pytest.mark.parametrize("left", [True, False])
def test_the_cupy_split_equals_the_pytorch_split_bit_for_bit(shape: tuple[int, ...], left: bool) -> None:
    _, source = _build("02_tall_skinny_matmul.py", "tf32x3-matmul")
    namespace: dict[str, Any] = {}
    exec(compile(source, "candidate", "exec"), namespace)
    assert namespace["cupy"] is not None
    x = torch.randn(shape, device="cuda") * 1e3
    dim = 1 if len(shape) > 1 else 0
    on_gpu = namespace["_stacked"](x, dim, left=left)
    on_cpu = namespace["_stacked"](x.cpu(), dim, left=left)  # the PyTorch ops
    assert on_gpu.shape == on_cpu.shape and on_gpu.is_cuda
    assert torch.equal(on_gpu.cpu().view(torch.int32), on_cpu.view(torch.int32))


@pytest.mark.parametrize("problem", ["19_conv2d_3x3.py", "20_conv2d_pointwise.py", "22_conv_transpose2d.py"])
def test_tf32x3_convolution_error_is_far_below_tf32s(problem: str) -> None:
    _, source = _build(problem, "tf32x3-matmul")
    assert "tf32x3_conv(" in source
    namespace: dict[str, Any] = {}
    exec(compile(source, "candidate", "exec"), namespace)
    torch.manual_seed(0)
    init = namespace["get_init_inputs"]()
    model, new = namespace["Model"](*init).cuda().eval(), namespace["ModelNew"](*init).cuda().eval()
    new.load_state_dict(model.state_dict())
    inputs = [t.cuda() for t in namespace["get_inputs"]()]
    was = torch.backends.cudnn.allow_tf32  # on by default in PyTorch: IEEE float32 needs it off
    try:
        with torch.no_grad():
            truth = model.double()(*[t.double() for t in inputs])
            model.float()
            torch.backends.cudnn.allow_tf32 = False
            fp32 = (model(*inputs).double() - truth).abs().max().item()
            emulated = (new(*inputs).double() - truth).abs().max().item()
            assert not torch.backends.cudnn.allow_tf32  # switched on inside the convolution only
            torch.backends.cudnn.allow_tf32 = True
            tf32 = (model(*inputs).double() - truth).abs().max().item()
    finally:
        torch.backends.cudnn.allow_tf32 = was
    print(
        f"{problem}: max abs error vs float64: IEEE float32 {fp32:.3g}, tf32x3 {emulated:.3g}, TF32 {tf32:.3g}"
    )
    assert tf32 > 5 * emulated
