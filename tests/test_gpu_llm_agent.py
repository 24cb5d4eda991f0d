"""The model agent on the GPU, end to end: a scripted model writes CUDA C++ for a GPU operator.

A local OpenAI-compatible server (tests/servers/openai_fake.py) plays the model: it reads the operator, writes
a CUDA candidate (built by torch.utils.cpp_extension.load_inline) that does not compile, then one that compiles
but computes the wrong thing, then a right one; it verifies and profiles that one and finishes. Everything else
is the product: `kernelbot optimize OP --agent llm` through litellm, the sandboxed harness on the GPU (build,
fresh seeds, timing against eager and torch.compile), the history database, `kernelbot export trajectories`.
Run on the GPU machine: `python3 -m pytest -m gpu tests/test_gpu_llm_agent.py` (litellm carried as a wheel).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from kernelbot.cli import main as kernelbot
from tests.servers.openai_fake import LITELLM_NAME, FakeOpenAI, register_price, reply, tool_call

pytestmark = pytest.mark.gpu

FAKE = LITELLM_NAME
ROWS, COLS = 8192, 8192

OPERATOR = f'''"""SiLU written as x * sigmoid(x): two kernels and a temporary in eager PyTorch."""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn({ROWS}, {COLS}) * 3.0]


def get_init_inputs():
    return []
'''

CONFIG = """\
harness:
  time_budget_s: 1.0
  timeout_s: 300
agent:
  max_turns: 12
  max_cost_usd: 1.0
"""

# The binding: contiguous float32 CUDA input, output on the caller's current stream.
_BINDING = r"""
#include <ATen/cuda/CUDAContext.h>
void silu_launch(const float* x, float* y, long n, cudaStream_t stream);
torch::Tensor silu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    silu_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel(), at::cuda::getCurrentCUDAStream());
    return y;
}
"""

# float4 loads and stores over the aligned body, a scalar kernel for the tail; {EXPR} is the per-element math.
_KERNEL = r"""
__device__ __forceinline__ float silu1(float v) { return {EXPR}; }

__global__ void silu_vec(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = silu1(v.x); v.y = silu1(v.y); v.z = silu1(v.z); v.w = silu1(v.w);
        y[i] = v;
    }
}

__global__ void silu_tail(const float* __restrict__ x, float* __restrict__ y, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = silu1(x[i]);
}

void silu_launch(const float* x, float* y, long n, cudaStream_t stream) {
    bool aligned = ((unsigned long)x % 16 == 0) && ((unsigned long)y % 16 == 0);
    long n4 = aligned ? n / 4 : 0;
    if (n4 > 0) {
        long blocks = (n4 + 255) / 256;
        silu_vec<<<(int)(blocks < 8192 ? blocks : 8192), 256, 0, stream>>>(
            reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4);
    }
    long rest = n - 4 * n4;
    if (rest > 0) silu_tail<<<(int)((rest + 255) / 256), 256, 0, stream>>>(x, y, 4 * n4, n);
}
"""


def candidate(name: str, expr: str) -> str:
    kernel = _KERNEL.replace("{EXPR}", expr)
    return f'''import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="{name}",
    cpp_sources=r"""{_BINDING}""",
    cuda_sources=r"""{kernel}""",
    functions=["silu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.silu(x)
'''


BROKEN = candidate("kb_silu_a", "v / (1.0f + expf(-w))")  # `w` is undeclared: nvcc fails
WRONG = candidate("kb_silu_b", "v / (1.0f + expf(v))")  # sign slip: x * sigmoid(-x)
RIGHT = candidate("kb_silu_c", "v / (1.0f + expf(-v))")


def script() -> list[dict[str, Any]]:
    return [
        reply(None, tool_call("read_file", {"path": "ops/silu.py"}, "c0")),
        reply(
            "One fused CUDA kernel, float4 loads.",
            tool_call("write_candidate", {"source": BROKEN, "description": "fused CUDA SiLU"}, "c1"),
            tool_call("compile", {}, "c2"),
        ),
        reply(
            None,
            tool_call("write_candidate", {"source": WRONG, "description": "fused CUDA SiLU"}, "c3"),
            tool_call("verify", {}, "c4"),
        ),
        reply(
            None,
            tool_call("write_candidate", {"source": RIGHT, "description": "fused CUDA SiLU, float4"}, "c5"),
            tool_call("verify", {}, "c6"),
            tool_call("profile", {}, "c7"),
        ),
        reply("One pass over memory instead of three.", tool_call("finish", {"summary": "fused"}, "c8")),
        reply(None, tool_call("finish", {}, "c9")),
    ]


def test_the_model_agent_builds_verifies_and_times_a_cuda_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("litellm")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    monkeypatch.setenv("KERNELBOT_LLM_API_KEY", "sk-device-check")  # the fake server accepts any key
    register_price()
    repo = tmp_path / "repo"
    (repo / "ops").mkdir(parents=True)
    (repo / "ops" / "silu.py").write_text(OPERATOR)
    (repo / ".github").mkdir()
    (repo / ".github" / "kernelbot.yml").write_text(CONFIG)
    db = f"sqlite:///{repo / 'history.db'}"
    result_json, trajectories = repo / "optimize.json", tmp_path / "trajectories.jsonl"
    with FakeOpenAI(script()) as server, contextlib.chdir(repo):
        code = kernelbot(
            ["optimize", "ops/silu.py", "--agent", "llm", "--model", FAKE, "--api-base", server.api_base,
             "--device", "cuda", "--out", str(repo / "out"), "--json", str(result_json), "--db", db]
        )  # fmt: skip
    told = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert code == 0, told
    data = json.loads(result_json.read_text())
    best = data["best"]
    assert best is not None and best["status"] == "ok" and best["origin"] == f"llm:{FAKE}", data["candidates"]
    assert kernelbot(["export", "trajectories", "--db", db, "--out", str(trajectories)]) == 0
    [trajectory] = [json.loads(x) for x in trajectories.read_text().splitlines()]
    assert (trajectory.get("final") or {}).get("source") == RIGHT
