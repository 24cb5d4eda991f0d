"""staticcheck.scan: each hack pattern is found (through aliases), honest kernels pass untouched."""

from __future__ import annotations

import textwrap

import pytest

from kernelbot.harness.staticcheck import Finding, scan


def rules(source: str, **kwargs: bool) -> set[str]:
    return {f.rule for f in scan(textwrap.dedent(source), **kwargs)}


FLAGGED = [
    # timers, synchronize, the harness, builtins
    ("monkeypatch", "import time\ntime.perf_counter_ns = lambda: 0\n"),
    ("monkeypatch", "import time as t\nsetattr(t, 'perf_counter', lambda: 0.0)\n"),
    ("monkeypatch", "from torch import cuda\ncuda.synchronize = lambda: None\n"),
    ("monkeypatch", "import torch\ntorch.matmul = lambda a, b: a\n"),
    ("monkeypatch", "from torch import nn\nnn.Module.__call__ = lambda self, *a: a[0]\n"),
    ("monkeypatch", "import torch\ndel torch.cuda.Event\n"),
    ("monkeypatch", "import builtins\nbuiltins.bool = lambda x: False\n"),
    ("monkeypatch", "import torch\nlib = torch.library.Library('aten', 'IMPL')\n"),
    ("monkeypatch", "import torch\n@torch.library.impl('aten::mm', 'CPU')\ndef f(a, b): return a\n"),
    ("harness-access", "import kernelbot.harness.timing as t\n"),
    ("harness-access", "from kernelbot.harness import compare\n"),
    # threads and processes
    ("concurrency", "import threading\n"),
    ("concurrency", "from concurrent.futures import ThreadPoolExecutor\n"),
    ("concurrency", "import multiprocessing as mp\n"),
    ("concurrency", "import subprocess\n"),
    ("concurrency", "import os\nos.fork()\n"),
    ("concurrency", "import os\nos.system('true')\n"),
    ("concurrency", "from os import posix_spawn\n"),
    ("concurrency", "import asyncio\n"),
    ("concurrency", "import torch\nfut = torch.jit.fork(f, x)\n"),
    ("concurrency", "src = 'std::thread t([]{});'\n"),
    # streams
    ("stream", "import torch\ns = torch.cuda.Stream()\n"),
    ("stream", "import torch\nwith torch.cuda.stream(s):\n    pass\n"),
    ("stream", "import torch\ntorch.cuda.set_stream(s)\n"),
    ("stream", "import cupy as cp\ns = cp.cuda.Stream(non_blocking=True)\n"),
    ("stream", "src = 'cudaStream_t s; cudaStreamCreate(&s);'\n"),
    # tensor subclasses and dispatch hooks
    ("tensor-subclass", "import torch\nclass Lazy(torch.Tensor):\n    pass\n"),
    ("tensor-subclass", "from torch import Tensor as T\nclass Lazy(T):\n    pass\n"),
    ("tensor-subclass", "import torch\nx = torch.Tensor._make_subclass(C, y)\n"),
    ("tensor-subclass", "y = x.as_subclass(C)\n"),
    ("tensor-subclass", "class C:\n    def __torch_function__(cls, f, t, a=(), k=None):\n        pass\n"),
    ("tensor-subclass", "from torch.utils._python_dispatch import TorchDispatchMode\n"),
    ("tensor-subclass", "out.__class__ = Lazy\n"),
    # introspection, the channel
    ("introspection", "import gc\n"),
    ("introspection", "import inspect\n"),
    ("introspection", "import sys\nf = sys._getframe(1)\n"),
    ("introspection", "import sys\nframes = sys._current_frames()\n"),
    ("introspection", "import sys\nfd = int(sys.argv[2])\n"),
    ("introspection", "import sys\nm = sys.modules['x']\n"),
    ("introspection", "import os\nos.write(5, b'x')\n"),
    ("introspection", "import os\nos.dup2(1, 5)\n"),
    ("introspection", "from os import fdopen\n"),
    ("introspection", "import ctypes\n"),
    ("introspection", "open('/proc/self/fd/5', 'wb')\n"),
    ("introspection", "g = f.__globals__\n"),
    ("introspection", "k = reply.__closure__[0].cell_contents\n"),
    ("introspection", "import os\nw = getattr(os, 'write')\n"),
    # network
    ("network", "import socket\n"),
    ("network", "from urllib.request import urlopen\n"),
    ("network", "import http.client\n"),
    ("network", "import requests\n"),
    # code built at run time
    ("dynamic-code", "eval('1')\n"),
    ("dynamic-code", "exec('x = 1')\n"),
    ("dynamic-code", "m = __import__('o' + 's')\n"),
    ("dynamic-code", "import importlib\nm = importlib.import_module(name)\n"),
    ("dynamic-code", "import torch\nf = getattr(torch, name)\n"),
    # precision
    ("precision-flag", "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n"),
    ("precision-flag", "import torch\ntorch.backends.cudnn.allow_tf32 = True\n"),
    ("precision-flag", "import torch\ntorch.set_float32_matmul_precision('high')\n"),
    ("precision-flag", "import torch\ntorch.set_float32_matmul_precision('medium')\n"),
    (
        "precision-flag",
        "import torch\ntorch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True\n",
    ),
]


@pytest.mark.parametrize(
    ("rule", "source"), FLAGGED, ids=[f"{r}:{s.splitlines()[-1][:40]}" for r, s in FLAGGED]
)
def test_flags(rule: str, source: str) -> None:
    assert rule in rules(source)


HONEST = {
    "load_inline": """
        import torch
        from torch.utils.cpp_extension import load_inline

        src = "torch::Tensor add(torch::Tensor a, torch::Tensor b) { return a + b; }"
        ext = load_inline(name="add_ext", cpp_sources=src, functions=["add"], verbose=False)

        class ModelNew(torch.nn.Module):
            def forward(self, a, b):
                return ext.add(a, b)
    """,
    "cupy_rawkernel": """
        import cupy as cp
        import torch

        kernel = cp.RawKernel(r'''
        extern "C" __global__ void relu(const float* x, float* y, int n) {
            int i = blockDim.x * blockIdx.x + threadIdx.x;
            if (i < n) y[i] = x[i] > 0 ? x[i] : 0;
        }''', "relu")

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                    kernel(((x.numel() + 255) // 256,), (256,), (x, y, x.numel()))
                return y
    """,
    "triton": """
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0), mask=mask)

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
                return y
    """,
    "torch_compile": """
        import torch
        from torch import compile as tc
        torch._dynamo.config.cache_size_limit = 64
        torch.backends.cudnn.benchmark = True

        class ModelNew(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.f = torch.compile(torch.relu, mode="max-autotune")
                self.g = tc(torch.sigmoid)

            def forward(self, x):
                return self.f(x) + self.g(x)
    """,
    "current_stream_read": """
        import os
        import sys
        import time
        import torch

        class ModelNew(torch.nn.Module):
            \"\"\"Mentions kernelbot in a docstring only.\"\"\"
            def __init__(self):
                super().__init__()
                self.stream = torch.cuda.current_stream() if torch.cuda.is_available() else None
                self.weight = torch.nn.Parameter(torch.ones(4))
                self.t0 = time.perf_counter()
                self.env = os.environ.get("X"), os.path.join("a", "b")
                sys.stderr.write("")

            def forward(self, x):
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.set_float32_matmul_precision("highest")
                return torch.nn.functional.relu(x) @ self.weight.view(4, 1).expand(4, 4)[:, :1].t()
    """,
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_kernels_pass(name: str) -> None:
    assert scan(textwrap.dedent(HONEST[name])) == []


def test_tf32_policy() -> None:
    source = "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\ntorch.set_float32_matmul_precision('high')\n"
    assert rules(source) == {"precision-flag"}
    assert rules(source, allow_tf32=True) == set()
    assert rules("import torch\ntorch.set_float32_matmul_precision('medium')\n", allow_tf32=True) == {
        "precision-flag"
    }


def test_cudnn_flags_turn_tf32_on_unless_told_not_to() -> None:
    """torch.backends.cudnn.flags() defaults to allow_tf32=True: a bare call enables TF32 implicitly."""
    call = "import torch\nwith torch.backends.cudnn.flags({}):\n    pass\n"
    for implicit in (
        "enabled=True",
        "True, True",
        "True, True, 10, False, True",
        "enabled=True, allow_tf32=True",
    ):
        assert rules(call.format(implicit)) == {"precision-flag"}, implicit
        assert rules(call.format(implicit), allow_tf32=True) == set(), implicit
    for explicit in ("enabled=True, allow_tf32=False", "True, False, 10, False, False"):
        assert rules(call.format(explicit)) == set(), explicit


def test_require_kernel() -> None:
    fallback = """
        from op import Model

        class ModelNew(Model):
            def forward(self, a, b):
                return super().forward(a, b)
    """
    assert rules(fallback) == set()
    found = scan(textwrap.dedent(fallback), require_kernel=True)
    assert {f.rule for f in found} == {"reference-fallback"}
    assert {f.line for f in found} == {2, 4, 6}


def test_findings_are_one_line_with_line_numbers() -> None:
    source = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        import threading\n        return x\n"
    (finding,) = scan(source)
    assert finding == Finding(6, "concurrency", finding.message)
    assert "threading" in finding.message and "\n" not in finding.message


def test_syntax_error_is_left_to_the_loader() -> None:
    assert scan("def f(:\n") == []
    assert [f.rule for f in scan("def f(:\n  '/proc/self/mem'\n")] == ["introspection"]


def test_a_wrapper_stacked_on_a_kernel_candidate_may_call_its_forward() -> None:
    # A stacked wrapper (TF32, a compile mode) subclasses the kernel candidate defined above it in the file:
    # its super().forward runs that kernel. Inheriting from the reference one step removed is still caught.
    stacked = """
        import torch

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return my_kernel(x)

        class ModelNew(ModelNew):
            def forward(self, x):
                return super().forward(x)
    """
    assert rules(stacked, require_kernel=True) == set()
    laundered = """
        from op import Model as Reference

        class Middle(Reference):
            pass

        class ModelNew(Middle):
            def forward(self, x):
                return super().forward(x)
    """
    found = scan(textwrap.dedent(laundered), require_kernel=True)
    assert {f.rule for f in found} == {"reference-fallback"}
    sneaky = """
        import op

        class ModelNew(op.Model):
            def forward(self, x):
                return super().forward(x)
    """
    assert {f.line for f in scan(textwrap.dedent(sneaky), require_kernel=True)} >= {4, 6}
