"""On a CUDA device: the rules added after run 7 — the fused epilogue's two kernels, conv1x1-matmul, split-k-linear.

Run 7's probe timed the four-wide kernel's math as a variant, not the template's own kernels, and the two
rewrites were verified on the CPU only. Run with `python3 -m pytest -m gpu tests/test_gpu_epilogue.py`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

from kernelbot.agents.base import Task
from kernelbot.agents.rules import load_rules
from kernelbot.agents.search import SearchAgent
from kernelbot.analysis.tracer import analyze
from kernelbot.config import PrecisionPolicy
from kernelbot.harness.evaluate import Settings, evaluate
from kernelbot.spec import kernelbench_spec

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
PROBLEMS = Path(__file__).resolve().parents[1] / "benchmarks" / "problems"
FAST = Settings(timeout_s=300.0, time_budget_s=0.3, max_samples=20)


def _candidate(problem: str, rule_id: str, tmp_path: Path) -> tuple[dict, Path]:
    spec = kernelbench_spec(problem)
    job = spec.job(PROBLEMS, "cuda")
    rules = {r.id: r for r in load_rules()}
    facts = analyze(job, ["conv1x1_matmul", "split_k_linear"]) | {"eager_ms": 1.0}
    task = Task(spec, PROBLEMS, "cuda", (PROBLEMS / problem).read_text(), PrecisionPolicy(), facts)
    source = SearchAgent(list(rules.values())).build(rules[rule_id], task)
    assert source is not None
    path = tmp_path / f"{rule_id}.py"
    path.write_text(source)
    return job, path


@pytest.mark.parametrize(
    ("problem", "rule_id"),
    [
        ("18_gelu_tanh_manual.py", "fused-elementwise-epilogue"),  # the whole graph, pow included
        ("30_silu_scale_residual.py", "fused-elementwise-epilogue"),
        ("20_conv2d_pointwise.py", "conv1x1-matmul"),
        ("34_mlp_small_batch.py", "split-k-linear"),
    ],
)
def test_new_candidates_verify_on_the_gpu(tmp_path: Path, problem: str, rule_id: str) -> None:
    job, path = _candidate(problem, rule_id, tmp_path)
    ev = evaluate(
        job, "candidate", FAST, candidate=str(path), require_kernel=rule_id == "fused-elementwise-epilogue"
    )
    assert ev.status == "ok", ev.reason


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("candidate", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_epilogue_takes_its_four_wide_kernel_only_on_aligned_counts_of_four(tmp_path: Path) -> None:
    _, path = _candidate("17_silu_manual.py", "fused-elementwise-epilogue", tmp_path)
    module = _load(path)
    model = module.ModelNew().cuda()
    base = torch.randn(4099, device="cuda")
    # aligned and a multiple of four; four bytes off; a count not divisible by four
    for suffix, x in [("_x4", base[:4096]), ("", base[1:4097]), ("", base[:4097])]:
        module._KERNELS.clear()
        torch.testing.assert_close(model(x), x * torch.sigmoid(x), atol=1e-6, rtol=1e-6)
        assert [name for _, name in module._KERNELS] == [f"fused_epilogue_2{suffix}"]
