"""Device check of the model agent: the scripted model writes CUDA C++ for a GPU operator, end to end.

On the GPU machine, from the repository root (litellm carried as wheels):
    PYTHONPATH=. python3 benchmarks/gpu_llm_agent.py --out DIR

A local OpenAI-compatible server (tests/servers/openai_fake.py) plays the model with scripted turns: it reads the
operator, writes a CUDA candidate (built by torch.utils.cpp_extension.load_inline) that does not compile, then
one that compiles but computes the wrong thing, then a right one; it verifies and profiles that one and
finishes. Everything else is the product: `kernelbot optimize OP --agent llm` through litellm, the sandboxed
harness on the GPU (build, ≥5 fresh seeds, timing against eager and torch.compile, ncu where counters can be
read), the history database, and `kernelbot export trajectories`. Writes DIR/llm_agent.json (the optimize
JSON, what the model was told after each tool call, the exported trajectory) and DIR/trajectories.jsonl.
Exits 1 unless the right candidate was built, verified and timed on the GPU and the trajectory exported.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from kernelbot.cli import main as kernelbot  # noqa: E402
from tests.servers.openai_fake import LITELLM_NAME, FakeOpenAI, register_price, reply, tool_call  # noqa: E402

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


def run(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    os.environ["KERNELBOT_LLM_API_KEY"] = "sk-device-check"  # the fake server accepts any key
    register_price()
    repo = Path(tempfile.mkdtemp(prefix="kernelbot-llm-gpu-"))
    (repo / "ops").mkdir()
    (repo / "ops" / "silu.py").write_text(OPERATOR)
    (repo / ".github").mkdir()
    (repo / ".github" / "kernelbot.yml").write_text(CONFIG)
    db = f"sqlite:///{repo / 'history.db'}"
    result_json, trajectories = repo / "optimize.json", out / "trajectories.jsonl"
    started = time.monotonic()
    with FakeOpenAI(script()) as server, contextlib.chdir(repo):
        code = kernelbot(
            ["optimize", "ops/silu.py", "--agent", "llm", "--model", FAKE, "--api-base", server.api_base,
             "--device", "cuda", "--out", str(repo / "out"), "--json", str(result_json), "--db", db]
        )  # fmt: skip
    optimize_s = time.monotonic() - started
    messages = server.requests[-1]["messages"] if server.requests else []
    told = [m["content"] for m in messages if m["role"] == "tool"]
    export_code = kernelbot(["export", "trajectories", "--db", db, "--out", str(trajectories)])
    data = json.loads(result_json.read_text()) if result_json.exists() else {}
    lines = [json.loads(x) for x in trajectories.read_text().splitlines()] if trajectories.exists() else []
    report = {
        "optimize_exit": code,
        "optimize_wall_s": round(optimize_s, 1),
        "export_exit": export_code,
        "requests": len(server.requests),
        "tool_results": told,
        "optimize": data,
        "trajectory": lines[0] if lines else None,
    }
    (out / "llm_agent.json").write_text(json.dumps(report, indent=1, default=str))
    buf = io.StringIO()
    print(
        f"kernelbot optimize --agent llm: exit {code} in {optimize_s:.0f} s; export exit {export_code}",
        file=buf,
    )
    for i, text in enumerate(told):
        print(f"--- tool result {i}:\n{text[:1500]}", file=buf)
    best = data.get("best")
    base = data.get("baselines", {})
    print(f"baselines: {json.dumps(base)[:600]}", file=buf)
    print(f"best: {json.dumps(best)[:800]}", file=buf)
    if lines:
        t = lines[0]
        print(
            f"trajectory: {len(t.get('messages', []))} messages, reward {t.get('reward')}, "
            f"final source {len((t.get('final') or {}).get('source') or '')} chars",
            file=buf,
        )
    print(buf.getvalue())
    (out / "llm_agent.log").write_text(buf.getvalue())
    ok = (
        code == 0
        and export_code == 0
        and best is not None
        and best["status"] == "ok"
        and (lines and (lines[0].get("final") or {}).get("source") == RIGHT)
    )
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    return run(parser.parse_args().out)


if __name__ == "__main__":
    sys.exit(main())
