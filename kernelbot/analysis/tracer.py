"""Operator analysis in a child process: trace forward with torch.fx, list its ops and modules, try rewrites.

Run as `python -m kernelbot.analysis.tracer IN.json OUT.json`. The operator is the pull request's own code,
so it runs here, in a process of its own with a time limit, and never in the bot's process.
"""

from __future__ import annotations

import copy
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from torch import fx
from torch.fx.passes.shape_prop import ShapeProp
from torch.utils._python_dispatch import TorchDispatchMode

from kernelbot.analysis import epilogue, sparse
from kernelbot.analysis.rewrites import all_rewrites
from kernelbot.harness import audit
from kernelbot.harness.loader import Operator

REWRITES = all_rewrites()  # found now, before the operator's (untrusted) files are imported


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def op_name(node: fx.Node, gm: fx.GraphModule) -> str | None:
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target)).lstrip("_").removesuffix("_")
    if node.op == "call_method":
        return str(node.target).removesuffix("_")
    if node.op == "call_module":
        return type(gm.get_submodule(str(node.target))).__name__.lower()
    return None


ALLOCATIONS = {"empty", "empty_like", "empty_strided"}  # memory only: no kernel


class _CountKernels(TorchDispatchMode):
    """Counts the ATen ops one forward dispatches, less views and bare allocations: about its kernel launches."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += not func.is_view and func.overloadpacket.__name__ not in ALLOCATIONS
        return func(*args, **(kwargs or {}))


def kernel_count(model: Any, inputs: list[Any]) -> int | None:
    """Launches per forward, from one eager call (graph or no graph): eager time over it says launch-bound."""
    try:
        with torch.no_grad(), _CountKernels() as counter:
            model(*inputs)
    except Exception:
        return None
    return counter.count


def gpu_busy_share(model: Any, inputs: list[Any], calls: int = 5) -> float | None:
    """The share of eager calls' wall time in which the GPU ran their kernels (CUPTI kernel records through
    torch.profiler, over a host clock around the same calls): low where launches, not kernels, take the
    time, which a CUDA graph removes. None off CUDA, or where the profiler could not say."""
    if not any(isinstance(t, torch.Tensor) and t.is_cuda for t in inputs):
        return None
    from torch.profiler import ProfilerActivity, profile

    try:
        with torch.no_grad():
            model(*inputs)  # warm-up: lazy initialisation and autotuning stay out
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                began = time.perf_counter()
                for _ in range(calls):
                    model(*inputs)
                torch.cuda.synchronize()
                wall_us = (time.perf_counter() - began) * 1e6
        from torch.autograd import DeviceType

        spans = [
            (e.time_range.start, e.time_range.end) for e in prof.events() if e.device_type == DeviceType.CUDA
        ]
    except Exception:
        return None
    return busy_share(spans, wall_us)


def busy_share(spans: list[tuple[float, float]], wall_us: float) -> float | None:
    """The time covered by the GPU's work (the union of its intervals: kernels on several streams overlap)
    over the wall time, at most 1; None where nothing ran."""
    busy, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    if wall_us <= 0 or busy <= 0:
        return None
    return round(min(1.0, busy / wall_us), 3)


def _outputs_without_inputs(gm: fx.GraphModule) -> int:
    """The graph's outputs when none of them is reached from a placeholder (else 0). symbolic_trace runs the
    operations on a buffer it does not proxy (one written in place: `self.buf.copy_(x)`, then computed on) for
    real, and keeps their results as constants: the graph then holds a copy_ and the outputs are
    `_tensor_constant`s, and rules would be matched on ops the forward does not show (a user's finding). One
    output that is a parameter beside a computed one (`return y, self.bias`) is honest; a forward with no
    inputs is left be."""
    reaches: dict[fx.Node, bool] = {}
    lost = 0
    for node in gm.graph.nodes:  # in topological order
        reaches[node] = node.op == "placeholder" or any(reaches.get(a, False) for a in node.all_input_nodes)
        if node.op == "output" and any(n.op == "placeholder" for n in gm.graph.nodes):
            leaves = [
                leaf for leaf in torch.utils._pytree.tree_leaves(node.args[0]) if isinstance(leaf, fx.Node)
            ]
            if leaves and not any(reaches[leaf] for leaf in leaves):
                lost = len(leaves)
    return lost


def analyze(job: dict[str, Any], rewrites: list[str]) -> dict[str, Any]:
    audit.install([job["root"]])  # before the operator's (untrusted) files are imported
    op = Operator(job)
    inputs = op.cases[0].make(0)
    facts: dict[str, Any] = {
        "kind": job["kind"],
        "input_dtypes": sorted(
            {
                str(t.dtype).removeprefix("torch.")
                for t in inputs
                if isinstance(t, torch.Tensor) and t.is_floating_point()
            }
        ),
        "input_shapes": [list(t.shape) for t in inputs if isinstance(t, torch.Tensor)],
        "modules": [],
        "ops": [],
        "traceable": False,
        "trace_error": None,
        "rewrites": {},
        "pointwise_tail": 0,
        "sparse": None,  # structure features of the first sparse matrix input (analysis/sparse.py)
    }
    matrix = sparse.first_sparse(inputs)
    if matrix is not None:
        try:
            facts["sparse"] = {
                **sparse.features(matrix),
                "rhs_cols": sparse.rhs_cols(inputs, matrix),
                "matrix": op.sparse_matrix,  # "static" or "per_call": what the operator says of it
            }
        except (RuntimeError, ValueError) as exc:  # a batched matrix: no features, the other facts stand
            facts["sparse_error"] = _one_line(exc)
    model = op.reference
    facts["kernels"] = kernel_count(model, inputs)
    facts["gpu_busy"] = gpu_busy_share(model, inputs)
    if isinstance(model, torch.nn.Module):
        facts["modules"] = sorted({type(m).__name__ for m in model.modules()} - {"Model"})
    try:
        gm = fx.symbolic_trace(model)
        ShapeProp(gm).propagate(*inputs)
    except Exception as exc:  # dynamic control flow and friends: rules that need a graph will not match
        facts["trace_error"] = _one_line(exc)
        return facts
    lost = _outputs_without_inputs(gm)
    if lost:
        facts["trace_error"] = (
            f"none of the trace's {lost} output(s) depends on an input: the forward computes on a tensor the tracer "
            "does not follow (a buffer written in place?), so the graph is not the forward"
        )
        return facts
    facts["traceable"] = True
    facts["ops"] = sorted({name for node in gm.graph.nodes if (name := op_name(node, gm))})
    try:  # the pointwise ops that end the graph, as one kernel could compute them; None where it cannot
        facts["epilogue"] = epilogue.describe(gm, job)
    except Exception:
        facts["epilogue"] = None
    # One definition of the fusable tail (a chain, or a graph such as x * sigmoid(x)): the epilogue's ops.
    facts["pointwise_tail"] = len(facts["epilogue"]["ops"]) if facts["epilogue"] else 0
    for name in rewrites:
        rewrite = REWRITES.get(name)
        if rewrite is None:
            facts["rewrites"][name] = {"applied": False, "description": f"unknown rewrite {name!r}"}
            continue
        changed = copy.deepcopy(gm)
        try:
            description = rewrite(changed)
        except Exception as exc:
            facts["rewrites"][name] = {
                "applied": False,
                "description": f"rewrite failed: {type(exc).__name__}: {exc}",
            }
            continue
        facts["rewrites"][name] = {
            "applied": description is not None,
            "description": description or "",
            "forward_code": changed.code if description else "",
        }
    return facts


def main() -> None:
    request = json.loads(Path(sys.argv[1]).read_text())
    try:
        result = {"ok": True, "facts": analyze(request["job"], request.get("rewrites", []))}
    except BaseException as exc:
        result = {
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}",
            "trace": traceback.format_exc()[-2000:],
        }
    with open(sys.argv[2], "w") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main()
