"""staticcheck.scan: each hack pattern is found (through aliases), honest kernels pass untouched."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch  # noqa: F401  (imported as the harness has it when it scans: the alias rule knows its modules)

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
    ("concurrency", "from torch.jit._async import fork\n"),
    ("concurrency", "import logging.handlers\nq = logging.handlers.QueueListener(None)\n"),
    ("concurrency", "import torch\nf = torch._C.fork\n"),
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
    ("introspection", "import os\nfor fd in range(3, 64):\n    os.posix_fallocate(fd, 0, 1 << 40)\n"),
    ("introspection", "from os import ftruncate as grow\ngrow(7, 1 << 33)\n"),
    ("introspection", "import os\nsize = os.fstat(9).st_size\n"),
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
    "dtype_alias": """
        import torch
        DT = torch.float16
        size = getattr(DT, "itemsize")
        kind = getattr(DT, name)
    """,
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


# Bypasses of the literal forms above, one class a group: (rule, fragment of the message, source).
BYPASSES = [
    # attacker rounds 21-24: names taken as values, torch through another module, lazy bits
    ("monkeypatch", "takes torch.library.Library as a value", "import torch\nmake = torch.library.Library\n"),
    (
        "monkeypatch",
        "takes torch.library.Library as a value",
        "from torch.library import Library\nm = Library\n",
    ),
    ("dynamic-code", "takes getattr as a value", "get = getattr\n"),
    ("dynamic-code", "takes object.__getattribute__ as a value", "g = object.__getattribute__\n"),
    ("dynamic-code", "passes the module torch around", "import torch\nt = torch.nn.functional.torch\n"),
    (
        "monkeypatch",
        "Library under another module's name",
        "from torch.backends.mps import _Library\nlib = _Library('aten', 'IMPL')\n",
    ),
    ("tensor-subclass", "uses torch._C._set_neg", "import torch\ntorch._C._set_neg(torch.ones(1), True)\n"),
    (
        "tensor-subclass",
        "_AutoDispatchBelowAutograd",
        "import torch\nwith torch._C._AutoDispatchBelowAutograd():\n    pass\n",
    ),
    # star imports: the forbidden names arrive bare
    ("concurrency", "imports * from os: os.fork", "from os import *\n"),
    ("concurrency", "uses os.fork", "from os import *\n\n\nif fork() == 0:\n    setsid()\n"),
    ("concurrency", "uses os.system", "from os import *\nx = 1\nsystem('true')\n"),
    ("concurrency", "uses os.kill", "from os import *\nx = 1\nkill(1, 9)\n"),
    ("concurrency", "uses subprocess", "from subprocess import *\n"),
    ("network", "uses socket", "from socket import *\n"),
    ("introspection", "uses ctypes", "from ctypes import *\n"),
    ("concurrency", "uses threading", "from threading import *\n"),
    ("introspection", "imports * from sys: sys.", "from sys import *\n"),
    # private C modules stand for the public ones
    ("network", "uses socket", "import _socket\n"),
    ("concurrency", "uses subprocess", "import _posixsubprocess\n"),
    ("concurrency", "uses _thread.start_new_thread", "from _thread import start_new_thread\n"),
    ("introspection", "uses ctypes", "import _ctypes\n"),
    ("concurrency", "uses multiprocessing", "import _multiprocessing\n"),
    ("concurrency", "uses multiprocessing", "import _posixshmem\n"),
    ("concurrency", "uses signal", "import _signal\n"),
    ("concurrency", "uses posix", "import posix\n"),
    ("concurrency", "uses nt", "from nt import system\n"),
    ("introspection", "imports _io: a private C module", "import _io\n"),
    ("dynamic-code", "uses importlib", "import _frozen_importlib\n"),
    # importers and computed module names
    ("network", "spells 'socket'", "import importlib\nm = importlib.import_module('so' + 'cket')\n"),
    ("dynamic-code", "uses __import__", "m = __import__(''.join(['o', 's']))\n"),
    ("dynamic-code", "reads .__import__", "import builtins\nm = builtins.__import__('os')\n"),
    ("dynamic-code", "reads .__import__", "m = len.__self__.__import__('os')\n"),
    ("dynamic-code", "uses pickle", "import pickle\npickle.loads(b'cos\\nsystem\\n')\n"),
    # names resolved through namespaces, getattr and text built at run time
    ("concurrency", "uses os.system", "import os\nos.__dict__['system']('true')\n"),
    ("dynamic-code", "a namespace lookup on os with a computed name", "import os\nf = os.__dict__[name]\n"),
    ("concurrency", "uses os.fork", "import os\nvars(os)['fork']()\n"),
    ("dynamic-code", "reads vars(os)", "import os\nns = vars(os)\n"),
    ("concurrency", "uses os.system", "import os\ngetattr(os, 'sys' + 'tem')('true')\n"),
    ("dynamic-code", "getattr on os with a computed name", "import os\nf = getattr(os, name)\n"),
    ("dynamic-code", "getattr on sys with a computed name", "import sys\nf = getattr(sys, name)\n"),
    ("introspection", "spells 'tb_frame'", "f = getattr(tb, 'tb_' + 'frame')\n"),
    ("introspection", "spells 'f_back'", "f = getattr(frame, 'f_' + 'back')\n"),
    ("introspection", "name built from 'f_'", "f = getattr(frame, 'f_' + suffix)\n"),
    ("introspection", "name built from '__'", "g = getattr(fn, f'__{part}')\n"),
    ("introspection", "spells 'gi_frame'", "f = object.__getattribute__(g, 'gi_' + 'frame')\n"),
    ("introspection", "spells 'tb_frame'", "import operator\nget = operator.attrgetter('tb_' + 'frame')\n"),
    ("dynamic-code", "uses globals", "m = globals()['o' + 's']\n"),
    ("dynamic-code", "passes the module os around", "import os\nm = [os][0]\nm.system('true')\n"),
    ("dynamic-code", "passes the module sys around", "import sys\ns = sys\nf = s._getframe()\n"),
    ("dynamic-code", "passes the module torch.backends.cudnn", "import torch\nc = torch.backends.cudnn\n"),
    ("concurrency", "uses torch.os.system", "import torch\ntorch.os.system('true')\n"),
    ("introspection", "uses torch.sys.modules", "import torch\nm = torch.sys.modules\n"),
    # os held by another module, under a private alias (attacker round 4 patched os.write through it)
    ("dynamic-code", "passes the module os around", "import tempfile\no = tempfile._os\no.write = print\n"),
    ("dynamic-code", "passes the module os around", "import shutil\nx = shutil.os\nx.system('true')\n"),
    ("concurrency", "uses tempfile._os.system", "import tempfile\ntempfile._os.system('true')\n"),
    ("concurrency", "uses tempfile._os.system", "from tempfile import _os\n_os.system('true')\n"),
    # frame, traceback and generator attributes, literal and spelt as (folded) strings
    ("introspection", "reads .f_builtins", "b = frame.f_builtins\n"),
    ("introspection", "reads .gi_frame", "f = gen.gi_frame\n"),
    ("introspection", "reads .cr_frame", "f = coro.cr_frame\n"),
    ("introspection", "reads .ag_frame", "f = agen.ag_frame\n"),
    (
        "introspection",
        "reads .__traceback__",
        "try:\n    pass\nexcept Exception as e:\n    t = e.__traceback__\n",
    ),
    ("introspection", "reads .__self__", "b = len.__self__\n"),
    (
        "introspection",
        "reads ._module",
        "import warnings\nm = warnings.catch_warnings()._module.sys.modules\n",
    ),
    (
        "dynamic-code",
        "getattr on torch.storage with a computed name",
        "import torch\ns = torch.storage\nm = getattr(s, name)\n",
    ),
    (
        "monkeypatch",
        "assigns torch.cuda.is_available",
        "import torch\nsetattr(getattr(torch, 'cu' + 'da'), 'is_' + 'available', print)\n",
    ),
    ("introspection", "reads .__code__", "f.__code__ = g.__code__\n"),
    ("introspection", "spells 'tb_frame'", "name = 'tb_frame'\n"),
    ("introspection", "spells 'f_globals'", "name = ''.join(['f_', 'glo', 'bals'])\n"),
    ("introspection", "spells 'f_locals'", "name = 'f_%s' % 'locals'\n"),
    ("introspection", "spells 'f_back'", "name = 'f_{}'.format('back')\n"),
    ("introspection", "spells 'gi_frame'", "a = 'gi'\nname = f'{a}_frame'\n"),
    ("introspection", "spells 'f_back'", "name = ''.join(map(chr, [102, 95, 98, 97, 99, 107]))\n"),
    ("introspection", "spells 'f_back'", "name = 'kcab_f'[::-1]\n"),
    ("introspection", "spells 'f_back'", "name = b'f_back'.decode()\n"),
    ("introspection", "spells '__globals__'", "name = '__GLOBALS__'.lower()\n"),
    ("introspection", "spells '__closure__'", "cells = fn.__dict__['__clo' + 'sure__']\n"),
    ("introspection", "spells 'f_back'", "import codecs\nname = codecs.decode('s_onpx', 'rot13')\n"),
    ("introspection", "spells 'f_back'", "import base64\nname = base64.b64decode('Zl9iYWNr').decode()\n"),
    ("introspection", "spells '_getframe'", "f = getattr(s, '_get' + 'frame')\n"),
    ("harness-access", "names kernelbot", "m = 'kernel' + 'bot.harness'\n"),
    # frames, stacks, object graphs, the process: sys, inspect, traceback, gc, ctypes, /proc, fds
    ("introspection", "uses sys._getframe", "from sys import _getframe\n"),
    ("introspection", "uses sys._current_frames", "import sys as s\nf = s._current_frames()\n"),
    ("introspection", "uses sys.exc_info", "import sys\ntb = sys.exc_info()[2]\n"),
    ("introspection", "uses inspect.currentframe", "from inspect import currentframe\n"),
    ("introspection", "uses inspect", "import inspect\ns = inspect.stack()\n"),
    ("introspection", "uses traceback.walk_tb", "from traceback import walk_tb\n"),
    ("introspection", "uses gc.get_referrers", "from gc import get_referrers\n"),
    ("introspection", "uses ctypes.pythonapi", "import ctypes as c\napi = c.pythonapi\n"),
    ("introspection", "names /proc/ or /dev/fd in a string", "path = '/pr' + 'oc/self/fd/5'\n"),
    ("introspection", "mentions /proc/ or /dev/fd", "out = open('/dev/fd/5', 'wb')\n"),
    ("introspection", "calls open(5)", "out = open(5, 'wb')\n"),
    ("introspection", "uses os.pwrite", "import os\nos.pwrite(5, b'x', 0)\n"),
    ("introspection", "uses faulthandler", "import faulthandler\n"),
    # the environment, process groups, double forks
    ("monkeypatch", "writes os.environ", "import os\nos.environ['NVIDIA_TF32_OVERRIDE'] = '1'\n"),
    ("monkeypatch", "writes os.environ", "from os import environ\nenviron.update(X='1')\n"),
    ("monkeypatch", "writes os.environ", "import os\nos.putenv('X', '1')\n"),
    ("concurrency", "uses os.setsid", "import os\nos.setsid()\n"),
    ("concurrency", "uses os.setpgrp", "import os\nos.setpgrp()\n"),
    ("concurrency", "uses os.fork", "import os\nif os.fork() == 0:\n    os.setsid()\n    os.fork()\n"),
    ("concurrency", "uses os.register_at_fork", "import os\nos.register_at_fork(after_in_child=f)\n"),
    ("concurrency", "native code starts threads or processes", "src = 'if (vfork() == 0) execvp(a, b);'\n"),
    # attacker round 58: a C handler on POSIX timers, code on its own clock with no thread to see
    (
        "native-signal",
        "installs signal handlers",
        "src = 'struct sigaction sa; sigaction(SIGRTMIN, &sa, 0);'\n",
    ),
    ("native-signal", "installs signal handlers", "src = 'sev.sigev_notify = SIGEV_THREAD_ID;'\n"),
    ("native-signal", "installs signal handlers", "src = 'sched_setaffinity(0, sizeof(s), &s);'\n"),
    ("native-signal", "installs signal handlers", "src = 'signal(SIGALRM, on_tick); alarm(1);'\n"),
    # a mode or kernel that runs in the harness's own torch calls (tests/adversarial/trust/lazy_*.py)
    ("tensor-subclass", "spells '__torch_function__'", "setattr(M, '__torch_' + 'function__', h)\n"),
    (
        "tensor-subclass",
        "uses torch._C._push_on_torch_function_stack",
        "import torch\ntorch._C._push_on_torch_function_stack(M())\n",
    ),
    (
        "tensor-subclass",
        "uses torch._C._dispatch_library",
        "from torch import _C\nlib = _C._dispatch_library('IMPL', 'aten', '', '', 0)\n",
    ),
]


@pytest.mark.parametrize(
    ("rule", "fragment", "source"), BYPASSES, ids=[f"{r}:{s.splitlines()[-1][:40]}" for r, _, s in BYPASSES]
)
def test_static_bypasses_are_caught(rule: str, fragment: str, source: str) -> None:
    found = scan(source)
    assert any(f.rule == rule and fragment in f.message for f in found), found
    assert all("\n" not in f.message for f in found)


def test_static_names_known_honest_patterns_pass() -> None:
    """Computed names on the candidate's own objects, reads of the environment, modules tested for None."""
    source = """
        import os
        import torch
        from torch import nn

        try:
            import cupy
        except ImportError:
            cupy = None


        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                for i in range(2):
                    setattr(self, f"conv{i}", nn.Conv2d(3, 3, 1))
                self.dtype = getattr(torch, "float32")
                self.debug = os.environ.get("KERNEL_DEBUG") == "1" and hasattr(torch, "compile")

            def forward(self, x):
                cache = self.__dict__.setdefault("_kernelbot_cache", {})
                for i in range(2):
                    x = getattr(self, "conv" + str(i))(x)
                if cupy is not None and isinstance(x, torch.Tensor):
                    cache["hit"] = True
                return x.to(self.dtype)
    """
    assert scan(textwrap.dedent(source)) == []


def test_static_star_import_without_forbidden_members_passes() -> None:
    assert scan("from math import *\nx = sqrt(2.0) * pi\n") == []


def test_static_a_chain_too_long_to_fold_is_refused() -> None:
    # Folded from the bottom up this chain spells "tb_frame"; top down it is deeper than folding follows.
    source = "".join(f"a{i} = a{i - 1} + ''\n" for i in range(3000, 1, -1)) + "a1 = 'tb_frame'[:3]\n"
    found = scan(source)
    assert any("nests too deeply" in f.message for f in found), found


def test_static_folding_stays_cheap() -> None:
    # Doubling a string forty times would take terabytes: folding gives up past its limit instead.
    source = "a0 = 'x' * 1000\n" + "".join(f"a{i} = a{i - 1} + a{i - 1}\n" for i in range(1, 40))
    assert scan(source) == []
    assert scan("w = '%999999999s' % 'tb_frame'\nv = '{:>999999999}'.format('x')\n") != []  # the literal


def test_torch_library_named_as_a_type_or_given_a_triton_kernel_passes() -> None:
    """Annotations and isinstance's types name torch.library's classes without calling them, and wrap_triton
    is given a kernel, not a namespace: none of it is a registration out of sight."""
    source = """
        import torch
        import triton


        @triton.jit
        def kernel(x):
            pass


        def launch(x: torch.Tensor, lib: torch.library.Library | None = None) -> torch.library.Library | None:
            torch.library.wrap_triton(kernel)[(1,)](x)
            return lib if isinstance(lib, (torch.library.Library, type(None))) else None
    """
    assert scan(textwrap.dedent(source)) == []


HONEST_DIR = Path(__file__).parent / "adversarial" / "honest"


@pytest.mark.parametrize("path", sorted(HONEST_DIR.glob("*.py")), ids=lambda p: p.stem)
def test_static_honest_files_pass(path: Path) -> None:
    assert scan(path.read_text()) == []


def test_static_rendered_templates_pass(tmp_path: Path) -> None:
    """Every template rule rendered for every operator of the template tests it fires on scans clean
    (`_render` scans with the rule's own precision and require_kernel, as the pipeline does)."""
    from kernelbot.agents.rules import load_rules
    from tests.test_rules_templates import ALL, OPERATORS, _facts, _render

    for name, source in OPERATORS.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source).lstrip())
    rendered: set[str] = set()
    for name in OPERATORS:
        for eager_ms in (0.03, 2.0):  # launch-bound (a CUDA graph fires) and not
            facts = _facts(tmp_path, name, eager_ms)
            for rule in load_rules():
                for device in ("cuda", "cpu"):
                    if rule.produces.template and rule.matches(facts, device, "kernelbench", ALL) is None:
                        _render(rule, tmp_path, name, facts, device)  # asserts scan(...) == []
                        rendered.add(rule.produces.template)
    assert len(rendered) >= 8, rendered
