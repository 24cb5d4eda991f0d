"""Probe (GPU): where the fused-epilogue kernel loses to Inductor on a large elementwise graph.

Run 6 (H200): on 17_silu_manual (x * sigmoid(x), 8192^2 float32) the `fused-elementwise-epilogue` candidate took
about 0.32 ms, Inductor 0.14 ms. This times, on one GPU and in one process, the rule's candidate as generated,
its CuPy kernel launched bare on the candidate's operands, the same math in variants of the kernel (grid
size, float4 loads), and torch's eager, compiled and clone paths: GPU time from CUDA events and host time per
call, in GB/s of the kernel's compulsory traffic (each operand read once, the output written once; for the
whole candidate and torch's paths the figure only compares, as their traffic differs). It reads CUDA events
and the host clock itself rather than through the harness's Timer, which reports one counted time per sample:
here the launch time and the GPU time are wanted apart.

Run 7 (results/2026-11-30-h200-x2-run7) answered it: the rule's kernel, one element a thread, ran at 1.8 TB/s
on 17 where float4 loads and stores reached 3.9 and a clone 4.15 (torch.compile 4.10). The template now has that
four-wide kernel (`<name>_x4`) beside a grid-stride one-element kernel: the bare launches time both.

    PYTHONPATH=. python3 benchmarks/probes/elementwise_bandwidth.py OUT.json [PROBLEM.py]
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cupy
import torch

from kernelbot.agents.rules import load_rules
from kernelbot.analysis.epilogue import describe_job
from kernelbot.render import render

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"
CALLS = 50


def _candidate(problem: str) -> tuple[Any, dict[str, Any]]:
    job = {"kind": "kernelbench", "root": str(PROBLEMS), "file": problem, "allow_tf32": False}
    ep = describe_job(job)
    assert ep is not None, f"{problem}: no fusable epilogue"
    rule = next(r for r in load_rules() if r.id == "fused-elementwise-epilogue")
    source = render(
        "kernels/fused_epilogue.py.j2",
        rule=rule,
        params=rule.produces.params,
        facts={"epilogue": ep},
        device="cuda",
    )
    path = Path(tempfile.mkdtemp()) / "candidate.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("candidate", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, ep


def _variant_source(ep: dict[str, Any], vector: bool) -> str:
    """The same statements as a device function, applied one float or one float4 at a time (same-shape inputs)."""
    args = ", ".join(f"float x{i}" for i in range(ep["inputs"]))
    body = "\n".join(f"    const float {s['var']} = {s['expr']};" for s in ep["statements"])
    ins = ", ".join(f"const float* __restrict__ in{i}" for i in range(ep["inputs"]))
    if not vector:
        call = ", ".join(f"in{i}[i]" for i in range(ep["inputs"]))
        loop = f"for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += step) out[i] = f({call});"
    else:
        loads = "\n".join(
            f"        const float4 a{i} = reinterpret_cast<const float4*>(in{i})[i];"
            for i in range(ep["inputs"])
        )
        lane = lambda c: ", ".join(f"a{i}.{c}" for i in range(ep["inputs"]))  # noqa: E731
        loop = (
            "for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n / 4; i += step) {\n"
            f"{loads}\n"
            f"        reinterpret_cast<float4*>(out)[i] = make_float4(f({lane('x')}), f({lane('y')}), f({lane('z')}), f({lane('w')}));\n"
            "    }"
        )
    return (
        f"__device__ __forceinline__ float f({args}) {{\n{body}\n    return {ep['result']};\n}}\n"
        f'extern "C" __global__ void k({ins}, float* __restrict__ out, const long long n) {{\n'
        "    const long long step = (long long)blockDim.x * gridDim.x;\n"
        f"    {loop}\n}}\n"
    )


def _time(fn: Callable[[], Any]) -> dict[str, float]:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(CALLS):
        fn()
    end.record()
    host = (time.perf_counter() - t0) / CALLS * 1e3  # launches only: nothing waits for the GPU until below
    torch.cuda.synchronize()
    return {"gpu_ms": start.elapsed_time(end) / CALLS, "host_ms": host}


def main() -> int:
    torch.set_grad_enabled(False)  # timed as the harness times: no autograd
    out_path = Path(sys.argv[1])
    problem = sys.argv[2] if len(sys.argv) > 2 else "17_silu_manual.py"
    module, ep = _candidate(problem)
    inputs = [t.cuda() for t in module.get_inputs()]
    model = module.ModelNew(*module.get_init_inputs()).cuda()
    spec = importlib.util.spec_from_file_location("problem", PROBLEMS / problem)
    assert spec and spec.loader
    problem_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(problem_module)
    eager = problem_module.Model(*problem_module.get_init_inputs()).cuda()
    compiled = torch.compile(eager)
    same_shape = all(index == "i" for index in ep["index"])
    # The kernel's operands: what the candidate's PyTorch prefix hands it (the operator's inputs, or values
    # computed from them, e.g. 18's pow); the bare launches read these, as the candidate's kernel does.
    operands = [t.contiguous() for t in model.prefix(*inputs)]
    out = torch.empty(ep["shape"], dtype=torch.float32, device="cuda")
    n = out.numel()
    nbytes = 4 * (sum(t.numel() for t in operands) + n)  # each operand read once, the output written once
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    ptrs = (*(t.data_ptr() for t in operands), out.data_ptr(), n)

    def launcher(kernel: Any, grid: int, block: int = 256) -> Callable[[], None]:
        def go() -> None:
            with stream:
                kernel((grid,), (block,), ptrs)

        return go

    scalar = cupy.RawKernel(_variant_source(ep, vector=False), "k")
    vector = cupy.RawKernel(_variant_source(ep, vector=True), "k")
    name = f"fused_epilogue_{len(ep['ops'])}"  # the template's kernels (run 7 had one: one element a thread)
    cases: dict[str, Callable[[], Any]] = {
        "eager": lambda: eager(*inputs),
        "torch.compile": lambda: compiled(*inputs),
        "torch clone (copy reference)": lambda: inputs[0].clone(),
        "rule candidate (ModelNew forward)": lambda: model(*inputs),
        "rule kernel, bare launch": launcher(module._kernel(name), module._grid_stride_blocks(out.device)),
        "same math, one element a thread": launcher(scalar, (n + 255) // 256),
        "same math, grid 8 x SMs (grid-stride)": launcher(scalar, 8 * sms),
    }
    if ep["lanes"] and n % 4 == 0:
        cases["rule kernel x4, bare launch"] = launcher(module._kernel(f"{name}_x4"), (n // 4 + 255) // 256)
    if same_shape and n % 4 == 0:
        cases["same math, float4, grid n/4/256"] = launcher(vector, (n // 4 + 255) // 256)
        cases["same math, float4, grid 8 x SMs"] = launcher(vector, 8 * sms)
    expected = eager(*inputs)
    rows = {}
    for name, fn in cases.items():
        r: dict[str, Any] = _time(fn)
        r["gb_per_s"] = nbytes / (r["gpu_ms"] * 1e-3) / 1e9
        if name.startswith(("rule", "same math")):  # a fast wrong kernel would explain nothing
            out.zero_()
            got = fn()  # the candidate returns its output; the bare launches write into `out`
            r["max_abs_err"] = float(((out if got is None else got) - expected).abs().max())
        rows[name] = r
        print(
            f"{name:42s} gpu {r['gpu_ms']:.4f} ms  host {r['host_ms']:.4f} ms  {r['gb_per_s']:7.0f} GB/s",
            flush=True,
        )
    result = {
        "problem": problem,
        "ops": ep["ops"],
        "elements": n,
        "compulsory_bytes": nbytes,
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cupy": cupy.__version__,
        "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "rows": rows,
    }
    out_path.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
