"""Sparse kernels on a generated problem set: every format of templates/kernels/sparse_spmm.py.j2 verified
against cuSPARSE and timed, the format the search agent's rules would choose, and the bandwidth each reaches.

    PYTHONPATH=. python3 -m benchmarks.sparse --out DIR [--device cuda] [--quick] [--budget-s S]
        [--dtype float32|bfloat16]

The set: six matrix classes (diagonal, banded, block-sparse, uniform random with short and with long rows,
power-law rows), each at two sizes (about 1M nonzeros, whose CSR arrays stay in an H200's 60 MB L2, and
about 24M, which do not), times a vector (SpMV) and a 32-column dense operand (SpMM). Each format's kernel
comes from rendering its rule's template exactly as the agent does; each output is compared with torch's CSR
product (cuSPARSE) by the harness's float32 rule with the float64 fallback; each time is the harness's
Timer (CUDA events, L2 flushed before every sample) under its adaptive stopping rule. The plan a padded format
builds from the pattern (the conversion) is timed apart: it is paid once per matrix when the matrix is
static, once per call when it is not.

Bandwidth: the CSR floor moves 8 bytes a nonzero (int32 column, float32 value) plus, per row, a row pointer
and the row's reads of the operand and writes of the output (4 + 8k bytes for k columns; 8 + 12/(nnz per row)
bytes a nonzero for SpMV); achieved = floor bytes / time, set against the device's measured copy bandwidth.
`--dtype bfloat16` makes every matrix and operand bfloat16 (the kernels read them as they are and sum in
float32; cuSPARSE through CuPy has no bfloat16 and is not applicable). Writes DIR/results.json and DIR/results.md.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from benchmarks.benchlib import environment, print_table
from kernelbot.agents.rules import Rule, load_rules
from kernelbot.analysis.sparse import features
from kernelbot.harness.compare import Golden, Mismatch, compare
from kernelbot.harness.timing import Sample, Timer, measure
from kernelbot.render import render

TEMPLATE = "sparse_spmm.py.j2"
TORCH = "torch (cuSPARSE)"  # the operator's own product, the eager reference every candidate must beat
SIZES = {"small": 1 << 20, "large": 24 << 20}  # nonzeros (small: the CSR arrays fit in L2)
QUICK_SIZES = {"small": 1 << 14, "large": 1 << 16}
WIDTHS = (1, 32)


# -- the problem set ------------------------------------------------------------------------------------


def _from_coo(rows: torch.Tensor, cols: torch.Tensor, n: int, gen: torch.Generator) -> torch.Tensor:
    """A CSR matrix with ones' positions at (rows, cols), duplicates merged, values standard normal."""
    coo = torch.sparse_coo_tensor(
        torch.stack([rows, cols]), torch.ones(rows.numel(), device=rows.device), (n, n)
    )
    csr = coo.coalesce().to_sparse_csr()
    values = torch.randn(csr.values().numel(), generator=gen, device=rows.device)
    return torch.sparse_csr_tensor(csr.crow_indices(), csr.col_indices(), values, (n, n))


def diagonal(nnz: int, gen: torch.Generator, device: str) -> torch.Tensor:
    i = torch.arange(nnz, device=device)
    return _from_coo(i, i, nnz, gen)


def banded(nnz: int, gen: torch.Generator, device: str, half: int = 4) -> torch.Tensor:
    """Every diagonal within `half` of the main one, full: a stencil's matrix."""
    n = nnz // (2 * half + 1)
    i = torch.arange(n, device=device).repeat(2 * half + 1)
    j = i + torch.arange(-half, half + 1, device=device).repeat_interleave(n)
    keep = (j >= 0) & (j < n)
    return _from_coo(i[keep], j[keep], n, gen)


def block_sparse(nnz: int, gen: torch.Generator, device: str, b: int = 8, per_row: int = 4) -> torch.Tensor:
    """Dense b x b blocks, `per_row` of them in each block row at random block columns."""
    block_rows = max(1, nnz // (b * b * per_row))
    n = block_rows * b
    br = torch.arange(block_rows, device=device).repeat_interleave(per_row)
    bc = torch.randint(0, block_rows, (br.numel(),), generator=gen, device=device)
    r = (br[:, None] * b + torch.arange(b, device=device)).repeat_interleave(b, dim=1).reshape(-1)
    c = (bc[:, None] * b + torch.arange(b, device=device)).repeat(1, b).reshape(-1)
    return _from_coo(r, c, n, gen)


def uniform(nnz: int, gen: torch.Generator, device: str, per_row: int = 8) -> torch.Tensor:
    """`per_row` nonzeros a row (a few fewer where two fall on one column) at uniformly random columns."""
    n = max(1, nnz // per_row)
    r = torch.arange(n, device=device).repeat_interleave(per_row)
    return _from_coo(r, torch.randint(0, n, (r.numel(),), generator=gen, device=device), n, gen)


def power_law(nnz: int, gen: torch.Generator, device: str, alpha: float = 1.3, mean: int = 8) -> torch.Tensor:
    """Row lengths of a Zipf law (a few rows with thousands of nonzeros, most with one or two), rows shuffled:
    a web or social graph's adjacency."""
    n = max(2, nnz // mean)
    rank = torch.arange(1, n + 1, device=device, dtype=torch.float64)
    weight = rank**-alpha
    lengths = (weight / weight.sum() * nnz).floor().long().clamp(1, n)
    lengths = lengths[torch.randperm(n, generator=gen, device=device)]
    r = torch.repeat_interleave(torch.arange(n, device=device), lengths)
    return _from_coo(r, torch.randint(0, n, (r.numel(),), generator=gen, device=device), n, gen)


CLASSES: dict[str, Callable[..., torch.Tensor]] = {
    "diagonal": diagonal,
    "banded": banded,
    "block-sparse": block_sparse,
    "uniform-short": lambda nnz, gen, device: uniform(nnz, gen, device, per_row=3),
    "uniform": lambda nnz, gen, device: uniform(nnz, gen, device, per_row=32),
    "power-law": power_law,
}


@dataclass
class Problem:
    name: str
    matrix_class: str
    size: str
    k: int
    matrix: torch.Tensor = field(repr=False)
    x: torch.Tensor = field(repr=False)


def problem_set(
    device: str,
    quick: bool = False,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    widths: tuple[int, ...] = WIDTHS,
) -> Iterator[Problem]:
    """One problem at a time: the whole set at width 256 held 68 GB before its first product (an H100 ran out)."""
    sizes = QUICK_SIZES if quick else SIZES
    for c, (cls, build) in enumerate(CLASSES.items()):
        for s, (size, nnz) in enumerate(sizes.items()):
            gen = torch.Generator(device=device).manual_seed(seed * 1000 + c * 10 + s)
            matrix = build(nnz, gen, device).to(dtype)
            for k in widths:
                shape = (matrix.shape[1],) if k == 1 else (matrix.shape[1], k)
                x = torch.randn(shape, generator=gen, device=device).to(dtype)
                yield Problem(f"{cls}/{size}/k{k}", cls, size, k, matrix, x)
                del x  # before the next width's operand is drawn
            del matrix  # and the matrix before the next one is built


# -- one problem: every format ----------------------------------------------------------------------------


def sparse_rules() -> list[Rule]:
    return [r for r in load_rules() if r.produces.template == TEMPLATE]


def facts_of(p: Problem) -> dict[str, Any]:
    """The facts the analysis gives the rules for this operator (tracer.analyze on `A @ x`)."""
    return {
        "sparse": {**features(p.matrix), "rhs_cols": p.k},
        "traceable": True,
        "input_dtypes": [str(p.x.dtype).removeprefix("torch.")],
        "rewrites": {"sparse_matmul": {"applied": True, "description": "", "forward_code": ""}},
        "eager_ms": 1.0,
    }


def candidate(rule: Rule, facts: dict[str, Any]) -> dict[str, Any]:
    """The rule's candidate module as the agent renders it, executed; its `sparse_spmm` and planners."""
    source = render(
        f"kernels/{TEMPLATE}", rule=rule, params=rule.produces.params, facts=facts, device="cuda",
        operator_source="from torch import nn\n\n\nclass Model(nn.Module):\n    pass",
    )  # fmt: skip
    source = source.split("\nclass ModelNew(Model):")[0]  # the forward is the operator's; the kernel is here
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<{rule.id}>", "exec"), namespace)
    return namespace


@dataclass
class Row:
    problem: str
    matrix_class: str
    size: str
    k: int
    subject: str
    status: str  # ok, incorrect, error, not_applicable
    ms: float | None = None
    convert_ms: float | None = None  # the plan's build from the pattern (once per matrix when static)
    gbps: float | None = None  # CSR floor bytes / time
    matched: bool = False  # the rule's structure bounds admit this matrix (the agent would try it)
    error: str = ""


def floor_bytes(p: Problem) -> int:
    """CSR's least traffic at the problem's dtype: a value and an int32 column a nonzero, a row pointer a row,
    the operand read and the output written once."""
    m, n = p.matrix.shape
    item = p.x.element_size()
    return (item + 4) * p.matrix.values().numel() + 4 * m + item * p.k * (m + n)


def _time(timer: Timer, fn: Callable[..., Any], args: list[Any], budget_s: float) -> float:
    calls = timer.calibrate(fn, [args])

    def take() -> Sample:
        timer.prepare_sample()
        seconds, _ = timer.one_sample(fn, [args], calls)
        return Sample(ms=seconds * 1e3)

    samples = measure(take, calls=calls, min_samples=10, max_samples=60, target_rse=0.005, budget_s=budget_s)
    ordered = sorted(samples.times_ms)
    return ordered[len(ordered) // 2]


def run_problem(p: Problem, rules: list[Rule], timer: Timer, budget_s: float) -> list[Row]:
    facts = facts_of(p)
    mtx = lambda a, x: torch.mv(a, x) if x.dim() == 1 else torch.sparse.mm(a, x)  # noqa: E731
    ref = mtx(p.matrix, p.x)
    golden = Golden(lambda: [mtx(p.matrix.double(), p.x.double())])
    base = {"problem": p.name, "matrix_class": p.matrix_class, "size": p.size, "k": p.k}
    ms = _time(timer, mtx, [p.matrix, p.x], budget_s)
    rows = [Row(**base, subject=TORCH, status="ok", ms=ms, gbps=floor_bytes(p) / ms / 1e6, matched=True)]
    for rule in rules:
        row = Row(**base, subject=rule.id, status="ok")
        row.matched = rule.matches(facts, "cuda", "kernelbench", {}) is None
        if rule.match.dtypes and facts["input_dtypes"][0] not in rule.match.dtypes:
            row.status, row.error = "not_applicable", f"takes {rule.match.dtypes}"
            rows.append(row)
            continue
        try:
            module = candidate(rule, facts)
            fn, planner = module["sparse_spmm"], module["_PLANNERS"][module["_FORMAT"]]
            compare(fn(p.matrix, p.x), ref, None, None, golden)
            row.convert_ms = 1e3 * timer.one_sample(planner, [[p.matrix]], 3)[0]
            row.ms = _time(timer, fn, [p.matrix, p.x], budget_s)
            row.gbps = floor_bytes(p) / row.ms / 1e6
        except Mismatch as exc:
            row.status, row.error = "incorrect", str(exc)[:300]
        except ValueError as exc:  # the plan refuses a matrix its format would store as mostly padding
            refused = "would store" in str(exc)
            row.status, row.error = ("not_applicable" if refused else "error"), str(exc)[:300]
        except Exception as exc:
            row.status, row.error = "error", f"{type(exc).__name__}: {exc}"[:300]
        rows.append(row)
    return rows


# -- the summary ------------------------------------------------------------------------------------------


def summarize(rows: list[Row]) -> list[dict[str, Any]]:
    """Per problem: the best format, the agent's choice (the fastest verified candidate among the rules that
    match, or eager when none is faster, as `kernelbot optimize` keeps it), cuSPARSE's best (torch's or
    cupyx's) and the speedups over it."""
    out = []
    for name in dict.fromkeys(r.problem for r in rows):
        mine = [r for r in rows if r.problem == name and r.status == "ok" and r.ms]
        if not any(r.subject == TORCH for r in mine):
            continue  # cuSPARSE itself did not run (out of memory): nothing to compare with
        cusparse = min(r.ms for r in mine if r.subject in (TORCH, "sparse-cusparse-cupyx"))  # type: ignore[type-var]
        best = min(mine, key=lambda r: r.ms)  # type: ignore[arg-type,return-value]
        chosen = min((r for r in mine if r.matched), key=lambda r: r.ms)  # type: ignore[arg-type,return-value]
        first = mine[0]
        out.append({
            "problem": name, "class": first.matrix_class, "size": first.size, "k": first.k,
            "best": best.subject, "best_ms": best.ms, "best_gbps": best.gbps,
            "chosen": chosen.subject, "chosen_ms": chosen.ms,
            "chosen_within_10pct": chosen.ms <= 1.1 * best.ms,  # type: ignore[operator]
            "cusparse_ms": cusparse, "best_speedup": cusparse / best.ms,  # type: ignore[operator]
            "chosen_speedup": cusparse / chosen.ms,  # type: ignore[operator]
            "verified": sum(r.status == "ok" for r in rows if r.problem == name),
            "incorrect": sum(r.status == "incorrect" for r in rows if r.problem == name),
        })  # fmt: skip
    return out


def copy_gbps(device: str) -> float | None:
    """The device's copy bandwidth (read + write of 1 GiB), the yardstick for a kernel's achieved GB/s."""
    if device != "cuda":
        return None
    src = torch.empty(1 << 28, device=device)
    dst = torch.empty_like(src)
    timer = Timer(device)
    ms = _time(timer, dst.copy_, [src], 2.0)
    return 2 * src.numel() * 4 / ms / 1e6


def markdown(env: dict[str, Any], summary: list[dict[str, Any]], rows: list[Row], peak: float | None) -> str:
    lines = [
        "# Sparse kernels against cuSPARSE", "",
        f"GPU {env.get('gpu')}, driver {env.get('driver')}, torch {env.get('torch')}, CuPy {env.get('cupy')}, "
        f"date {env.get('date')}; copy bandwidth {peak:.0f} GB/s" if peak else f"device {env.get('device')}",
        "",
        "| problem | best format | GB/s (share of copy) | speedup over cuSPARSE | agent's choice | within 10% | verified |",
        "|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for s in summary:
        share = f" ({s['best_gbps'] / peak:.0%})" if peak and s["best_gbps"] else ""
        lines.append(
            f"| {s['problem']} | {s['best']} | {s['best_gbps']:.0f}{share} | {s['best_speedup']:.2f}× | "
            f"{s['chosen']} ({s['chosen_speedup']:.2f}×) | {'yes' if s['chosen_within_10pct'] else 'no'} | "
            f"{s['verified']} ok, {s['incorrect']} wrong |"
        )
    lines.append("")
    for label in ("all", *SIZES):
        part = [s for s in summary if label in ("all", s["size"])]
        n = len(part) or 1
        within = sum(s["chosen_within_10pct"] for s in part)
        faster = sum(s["chosen_speedup"] > 1.0 for s in part)
        lines.append(
            f"- {label}: the agent's choice within 10% of the best on {within} of {len(part)} ({within / n:.0%}), "
            f"faster than cuSPARSE on {faster} ({faster / n:.0%}); geometric mean speedup over cuSPARSE of the "
            f"best format {math.exp(sum(math.log(s['best_speedup']) for s in part) / n):.2f}×, of the agent's "
            f"choice {math.exp(sum(math.log(s['chosen_speedup']) for s in part) / n):.2f}×"
        )
    lines += [
        "",
        "## Every subject",
        "",
        "| problem | subject | status | time | conversion | GB/s | rule matches |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        time_ = f"{r.ms * 1e3:.1f} µs" if r.ms else "—"
        conv = f"{r.convert_ms * 1e3:.0f} µs" if r.convert_ms else "—"
        gbps = f"{r.gbps:.0f}" if r.gbps else "—"
        note = f" {r.error[:80]}" if r.error else ""
        lines.append(
            f"| {r.problem} | {r.subject} | {r.status}{note} | {time_} | {conv} | {gbps} | {r.matched} |"
        )
    return "\n".join(lines) + "\n"


def save(out: Path, env: dict[str, Any], peak: float | None, rows: list[Row]) -> None:
    summary = summarize(rows)
    data = {"environment": env, "copy_gbps": peak, "summary": summary, "rows": [asdict(r) for r in rows]}
    (out / "results.json").write_text(json.dumps(data, indent=1, default=str))
    (out / "results.md").write_text(markdown(env, summary, rows, peak))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.sparse", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="small matrices (a CPU check of the script)")
    parser.add_argument("--budget-s", type=float, default=1.5, help="timing budget per subject")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--widths", type=int, nargs="+", default=list(WIDTHS), help="SpMM widths (1: SpMV)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    env = environment(args.device)
    timer = Timer(args.device)
    rules = sparse_rules()
    rows: list[Row] = []
    began = time.monotonic()
    dtype, widths = getattr(torch, args.dtype), tuple(args.widths)
    peak = copy_gbps(args.device)
    for p in problem_set(args.device, quick=args.quick, dtype=dtype, widths=widths):
        try:
            rows += run_problem(p, rules, timer, args.budget_s)
        except torch.OutOfMemoryError as exc:  # cuSPARSE's own product did not fit: the problem is skipped
            first = str(exc).split(". GPU")[0]  # "CUDA out of memory. Tried to allocate 24.00 GiB"
            rows.append(
                Row(p.name, p.matrix_class, p.size, p.k, TORCH, "error", error=f"out of memory: {first}")
            )
        del p
        if args.device == "cuda":
            torch.cuda.empty_cache()
        print(f"{rows[-1].problem}: {time.monotonic() - began:.0f} s", flush=True)
        save(args.out, env, peak, rows)  # after each problem: a call cut short keeps what it finished
    summary = summarize(rows)
    print_table(
        "sparse: best format and the agent's choice",
        ["problem", "best", "x cuSPARSE", "chosen", "x cuSPARSE", "within 10%"],
        [
            [s["problem"], s["best"], f"{s['best_speedup']:.2f}", s["chosen"], f"{s['chosen_speedup']:.2f}",
             str(s["chosen_within_10pct"])]
            for s in summary
        ],
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
