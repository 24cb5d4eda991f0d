"""Probe: which honest GPU workloads start OS threads (as /proc/self/task lists them) after CUDA is up.

The guard counts threads (alive, and the kernel's last task id; `guards.Integrity(count_native_threads=)`)
on CUDA too since this probe found none started by honest GPU work after its warm-up (an H100, 2026-12-06,
benchmarks/results/2026-12-06-h100-session/). A GPU runtime that starts its own would show here: each case in a
fresh process in a PID namespace of its own that first does what the worker does before its snapshot (CUDA
context, one cuBLAS call), runs the case once (the warm-up), then again: `alive_new` and `ids_given_out` are
the threads still alive and the task ids the kernel gave out during the second run.
Usage: python benchmarks/probes/native_threads.py OUT.json
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = {
    "elementwise": "y = x.relu()",
    "matmul": "y = x @ x",
    "cupy_rawkernel": (
        "import cupy\n"
        "k = cupy.RawKernel(r'''extern \"C\" __global__ void f(float* x, int n) {"
        " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }''', 'f')\n"
        "c = cupy.asarray(x.flatten())\n"
        "k((x.numel() // 256 + 1,), (256,), (c, cupy.int32(x.numel())))\n"
        "cupy.cuda.Device().synchronize()"
    ),
    "triton": (
        "import triton, triton.language as tl\n"
        "@triton.jit\n"
        "def f(p, n, B: tl.constexpr):\n"
        "    i = tl.program_id(0) * B + tl.arange(0, B)\n"
        "    tl.store(p + i, tl.load(p + i, mask=i < n) * 2, mask=i < n)\n"
        "f[(x.numel() // 1024 + 1,)](x, x.numel(), B=1024)"
    ),
    "torch_compile": "g = torch.compile(lambda t: (t * 2).relu() + 1)\ny = g(x)",
    "cuda_graph": (
        "g = torch.cuda.CUDAGraph()\ns = torch.cuda.Stream()\ns.wait_stream(torch.cuda.current_stream())\n"
        "with torch.cuda.stream(s):\n    y = x * 2\ntorch.cuda.current_stream().wait_stream(s)\n"
        "with torch.cuda.graph(g):\n    y = x * 2\ng.replay()"
    ),
    "side_stream_event": (
        "s = torch.cuda.Stream()\ne = torch.cuda.Event(enable_timing=True)\n"
        "with torch.cuda.stream(s):\n    y = x + 1\n    e.record()\ne.synchronize()"
    ),
}

CHILD = """
import os, sys, json, time, torch
def last_id():
    return int(open('/proc/sys/kernel/ns_last_pid').read())
def tasks():
    out = {}
    for t in os.listdir('/proc/self/task'):
        try:
            out[int(t)] = open(f'/proc/self/task/{t}/comm').read().strip()
        except OSError:
            pass
    return out
x = torch.randn(1024, 1024, device='cuda')
(x @ x).sum().item()  # CUDA context and cuBLAS up, as before the worker's snapshot
torch.cuda.synchronize()
import runpy
runpy.run_path(sys.argv[1])  # once: compilation and lazy start-up, as the worker's warm-up
torch.cuda.synchronize()
before, first = tasks(), last_id()
runpy.run_path(sys.argv[1])  # again, as a timed sample would
torch.cuda.synchronize()
time.sleep(0.2)
after = tasks()
print(json.dumps({'before': len(before), 'alive_new': sorted(after[t] for t in after.keys() - before.keys()),
                  'ids_given_out': last_id() - first}))
"""


def main() -> None:
    out = Path(sys.argv[1])
    results = {}
    # As the sandbox's workers run: one inductor compile thread (sandbox.worker_env).
    env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    for name, code in CASES.items():
        # from a file, so that triton.jit can read the source; `x` comes from the child's globals
        case = Path(tempfile.mkdtemp()) / f"{name}.py"
        case.write_text("import torch\nx = torch.randn(1024, 1024, device='cuda')\n" + code + "\n")
        # In a PID namespace of its own (as the sandbox's), so the last id counts only this process's tasks.
        jail = (
            ["bwrap", "--dev-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "--"]
            if shutil.which("bwrap")
            else []
        )
        run = subprocess.run(
            [*jail, sys.executable, "-c", CHILD, str(case)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        line = run.stdout.strip().splitlines()[-1:] if run.returncode == 0 else []
        results[name] = json.loads(line[0]) if line else {"error": run.stderr.strip().splitlines()[-3:]}
        print(name, results[name], flush=True)
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
