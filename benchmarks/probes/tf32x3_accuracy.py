"""Probe: how float32 GEMMs emulated on TF32 Tensor Cores lose accuracy with the inner dimension, and what fixes it.

On the GPU machine, from the repository root:  PYTHONPATH=. python3 benchmarks/probes/tf32x3_accuracy.py OUT.json

Run 4 on the H200 found the `tf32x3-matmul` candidate (one cuBLAS TF32 GEMM over [hi, hi, lo] x [hi; lo; hi])
10x IEEE float32's error at K = 2048 and refused at 1e-4 from K = 512 on: the operand rounding is gone, the Tensor
Cores' accumulation error is not. This probe measures, for M = N = 2048 and K from 256 to 4096 (unit normal
operands): the max abs error against float64 and the share of elements outside the harness's float32 tolerance
(1e-4 + 1e-4 |ref| against the IEEE float32 result), and the median time, of
  ieee      cuBLAS float32 (the eager reference)
  tf32      cuBLAS TF32
  tf32x3    the rule's candidate (rendered by the search agent from problem 01)
  chunked   the same on K-chunks of 256, the chunks' products summed in IEEE float32 (promotion by chunk)
  triton/*  a Triton GEMM with input_precision="tf32x3": acc = dot(a, b, acc) (Tensor Core accumulation), and
            acc += dot(a, b) (each BK-slice's product promoted into an IEEE float32 accumulator)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from kernelbot.agents.base import Task  # noqa: E402
from kernelbot.agents.rules import load_rules  # noqa: E402
from kernelbot.agents.search import SearchAgent  # noqa: E402
from kernelbot.analysis.tracer import analyze  # noqa: E402
from kernelbot.config import PrecisionPolicy  # noqa: E402
from kernelbot.spec import kernelbench_spec  # noqa: E402

PROBLEMS = REPO / "benchmarks" / "problems"
CHUNK = 256


def candidate_namespace() -> dict[str, Any]:
    """The rule's candidate for problem 01, as the search agent builds it: its helpers are what is probed."""
    spec = kernelbench_spec("01_square_matmul.py")
    facts = analyze(spec.job(PROBLEMS, "cpu"), ["tf32x3_products"])
    task = Task(
        spec, PROBLEMS, "cuda", (PROBLEMS / "01_square_matmul.py").read_text(), PrecisionPolicy(), facts
    )
    rule = next(r for r in load_rules() if r.id == "tf32x3-matmul")
    source = SearchAgent([rule]).build(rule, task)
    assert source is not None
    namespace: dict[str, Any] = {}
    exec(compile(source, "tf32x3_candidate", "exec"), namespace)
    return namespace


def triton_variants() -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return {}

    @triton.jit
    def mm(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,  # type: ignore[no-untyped-def]
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PROMOTE: tl.constexpr):  # fmt: skip
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a_ptrs = a_ptr + rm[:, None] * s_am + rk[None, :] * s_ak
        b_ptrs = b_ptr + rk[:, None] * s_bk + rn[None, :] * s_bn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
            b = tl.load(b_ptrs, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
            if PROMOTE:
                acc += tl.dot(a, b, input_precision="tf32x3")
            else:
                acc = tl.dot(a, b, acc, input_precision="tf32x3")
            a_ptrs += BK * s_ak
            b_ptrs += BK * s_bk
        tl.store(
            c_ptr + rm[:, None] * s_cm + rn[None, :] * s_cn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N)
        )

    def launch(promote: bool) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            m, k = a.shape
            n = b.shape[1]
            c = torch.empty(m, n, device=a.device, dtype=torch.float32)
            grid = (triton.cdiv(m, 128), triton.cdiv(n, 128))
            mm[grid](a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride(),
                     BM=128, BN=128, BK=32, PROMOTE=promote, num_warps=8, num_stages=3)  # fmt: skip
            return c

        return run

    return {"triton/tc-acc": launch(False), "triton/promoted": launch(True)}


def median_ms(fn: Callable[[], Any], reps: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tf32x3_accuracy.json")
    ns = candidate_namespace()
    emulated = ns["tf32x3_matmul"]

    def tf32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return a @ b
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    def chunked(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        c = k // CHUNK
        parts = emulated(a.reshape(m, c, CHUNK).transpose(0, 1), b.reshape(c, CHUNK, b.shape[1]))
        return parts.sum(0)

    variants: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
        "ieee": torch.matmul,
        "tf32": tf32,
        "tf32x3": emulated,
        "chunked": chunked,
        **triton_variants(),
    }
    rows = []
    torch.manual_seed(0)
    for k in (256, 512, 1024, 2048, 3072, 4096):
        a = torch.randn(2048, k, device="cuda")
        b = torch.randn(k, 2048, device="cuda")
        truth = a.double() @ b.double()
        ref = a @ b
        tol = 1e-4 + 1e-4 * ref.abs()
        for name, fn in variants.items():
            try:
                with torch.no_grad():
                    out_ = fn(a, b)
                    row = {
                        "K": k,
                        "variant": name,
                        "max_abs_err_vs_fp64": (out_.double() - truth).abs().max().item(),
                        "outside_float32_tolerance": ((out_ - ref).abs() > tol).float().mean().item(),
                        "median_ms": median_ms(lambda: fn(a, b)),  # noqa: B023  (called before the loop moves on)
                    }
            except Exception as exc:  # a variant that does not build is a result too
                row = {"K": k, "variant": name, "error": f"{type(exc).__name__}: {exc}"[:300]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    out.write_text(json.dumps({"env": env, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
