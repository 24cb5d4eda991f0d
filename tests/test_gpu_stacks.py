"""On a CUDA device: wrappers stacked on candidates that keep state or launch outside torch (run on the GPU machine).

The H200 run of 2026-11-30 found both: reduce-overhead on the conv-BN fold crashed (its cached folded weights
were CUDA-graph outputs, overwritten by the next replay), and max-autotune on the CuPy epilogue crashed (dynamo
handed the launch a traced stream). Run with `python3 -m pytest -m gpu tests/test_gpu_stacks.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelbot.agents.base import Proposal, Task, job_at_precision
from kernelbot.agents.rules import load_rules, rewrites_for
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


def _build(problem: str, base_rule: str, wrapper: str | None = None) -> tuple[dict, str]:
    """The job and the candidate the search agent builds: the base rule's, or the wrapper stacked on it."""
    spec = kernelbench_spec(problem)
    job = spec.job(PROBLEMS, "cuda")
    rules = {r.id: r for r in load_rules()}
    facts = analyze(job, rewrites_for(list(rules.values()))) | {"eager_ms": 0.05}
    task = Task(spec, PROBLEMS, "cuda", (PROBLEMS / problem).read_text(), PrecisionPolicy(), facts)
    agent = SearchAgent(list(rules.values()))
    base = agent.build(rules[base_rule], task)
    assert base is not None
    if wrapper is None:
        return job, base
    stacked = agent.build(rules[wrapper], task, on=Proposal(base, origin=base_rule, description=""))
    assert stacked is not None
    return job, stacked


@pytest.mark.parametrize(
    ("problem", "base", "wrapper"),
    [
        ("28_conv_bn_relu.py", "conv-bn-fold", "compile-reduce-overhead"),
        ("35_tiny_cnn.py", "conv-bn-fold", "cuda-graph-capture"),
        ("27_gemm_scale_relu.py", "fused-elementwise-epilogue", "compile-max-autotune"),
        ("34_mlp_small_batch.py", "tf32x3-matmul", "cuda-graph-capture"),  # CuPy splits inside a capture
        (
            "37_transformer_encoder_layer.py",
            "row-softmax-kernel",
            "cuda-graph-capture",
        ),  # CuPy softmax likewise
    ],
)
def test_stacked_wrapper_verifies_on_the_gpu(tmp_path: Path, problem: str, base: str, wrapper: str) -> None:
    job, source = _build(problem, base, wrapper)
    path = tmp_path / "candidate.py"
    path.write_text(source)
    if base == "tf32x3-matmul":
        job = job_at_precision(job, "tf32x3")
    ev = evaluate(
        job, "candidate", FAST, candidate=str(path), require_kernel=base == "fused-elementwise-epilogue"
    )
    assert ev.status == "ok", ev.reason
