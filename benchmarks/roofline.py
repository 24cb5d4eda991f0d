"""How far each measured operator is from the H200's roofline: the most any candidate could gain on it.

For every KernelBench-style operator of a `gpu_optimize.py` table (the examples' and the problems' files), the
compulsory traffic (inputs, parameters and buffers read once, outputs written once) and the FLOPs
(torch.utils.flop_counter, matmuls and convolutions) are counted on the meta device, and the roofline time,
max(bytes / bandwidth, FLOPs / peak), is set against the faster of the two baselines the table measured. A
reward 3 needs a candidate more than 5% faster than that baseline: where a memory-bound operator's
`baseline / roofline` is under 1.05, no candidate of any agent can earn it (no algorithm reads its inputs or
writes its outputs in less traffic). A compute-bound row counts the FLOPs of the operator as written: an
algebraic rewrite that removes work (a diagonal product as a scale, a reduction before a GEMM) is not bound by it. The bandwidth is what a clone reached on the H200 in run 7's
probe (4.15 TB/s, measured); the compute peak is NVIDIA's datasheet figure for FP32 without Tensor Cores (67
TFLOPS, not measured, and not reached by cuBLAS: run 7's 3072^3 SGEMM ran at 44), so the compute-bound
ceilings are loose upper bounds and the memory-bound ones tight.

    PYTHONPATH=. python3 benchmarks/roofline.py benchmarks/results/2026-11-30-h200-x2-run7 [--md OUT.md]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.gpu_optimize import targets

BANDWIDTH_B_PER_S = 4.15e12  # torch clone of 537 MB on the H200, run 7's probe
FP32_PEAK_FLOP_PER_S = 67e12  # H200 SXM datasheet, FP32 without Tensor Cores
REWARD3 = 1.05


def _tensors(value: Any) -> Iterable[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _tensors(v)


def _nbytes(tensors: Iterable[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def count(path: Path) -> dict[str, float]:
    """Compulsory bytes and FLOPs of one KernelBench-style file, on the meta device (nothing is allocated)."""
    spec = importlib.util.spec_from_file_location(f"roofline_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    with torch.device("meta"):
        spec.loader.exec_module(module)
        model = module.Model(*module.get_init_inputs()).eval()
        inputs = module.get_inputs()
        flops = FlopCounterMode(display=False)
        with torch.no_grad(), flops:
            out = model(*inputs)
    state = [*model.parameters(), *model.buffers()]
    nbytes = _nbytes(_tensors(inputs)) + _nbytes(state) + _nbytes(_tensors(out))
    return {"bytes": float(nbytes), "flops": float(flops.get_total_flops())}


def rows(results: Path) -> list[dict[str, Any]]:
    table = json.loads((results / "optimize_results.json").read_text())["rows"]
    # The table's operators and their files; a declared operator (examples/scale_shift) has no single file.
    files = {t.label: t.root / t.target for t in targets() if t.target.endswith(".py")}
    out = []
    for row in table:
        path = files.get(row["label"])
        times = [t for t in (row.get("eager_ms"), row.get("compile_ms")) if t]
        if path is None or not times:
            continue
        try:
            counted = count(path)
        except Exception as exc:  # a model the meta device cannot run: said, not guessed
            out.append({"label": row["label"], "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:120]})
            continue
        memory_ms = counted["bytes"] / BANDWIDTH_B_PER_S * 1e3
        compute_ms = counted["flops"] / FP32_PEAK_FLOP_PER_S * 1e3
        roofline_ms = max(memory_ms, compute_ms)
        baseline_ms = min(times)
        out.append(
            {
                "label": row["label"],
                "mb": counted["bytes"] / 1e6,
                "gflop": counted["flops"] / 1e9,
                "bound": "memory" if memory_ms >= compute_ms else "compute",
                "roofline_ms": roofline_ms,
                "baseline_ms": baseline_ms,
                "headroom": baseline_ms / roofline_ms,
                "best_reward": _best_reward(row),
            }
        )
    return out


def _best_reward(row: dict[str, Any]) -> int | None:
    """The best reward of a float32 candidate (exact or tf32x3) in the row, as the table's default policy."""
    rewards = [c["reward"] for c in row["candidates"] if c.get("precision") in ("exact", "tf32x3")]
    return max(rewards, default=None)


def markdown(table: list[dict[str, Any]]) -> str:
    lines = [
        "| operator | MB | GFLOP | bound | roofline ms | faster baseline ms | baseline / roofline | float32 reward |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(table, key=lambda r: r.get("headroom", float("inf"))):
        if "error" in r:
            lines.append(f"| {r['label']} | - | - | - | - | - | not counted: {r['error']} | - |")
            continue
        mark = " (no reward 3 possible)" if r["bound"] == "memory" and r["headroom"] < REWARD3 else ""
        lines.append(
            f"| {r['label']} | {r['mb']:.0f} | {r['gflop']:.2f} | {r['bound']} | {r['roofline_ms']:.4f} "
            f"| {r['baseline_ms']:.4f} | {r['headroom']:.3f}×{mark} | {r['best_reward']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("results", type=Path, help="a results folder with optimize_results.json")
    p.add_argument("--md", type=Path, help="write the table here too")
    a = p.parse_args(argv)
    text = markdown(rows(a.results))
    sys.stdout.write(text)
    if a.md:
        a.md.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
