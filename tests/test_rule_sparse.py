"""The sparse kernel rules: the rewrite that finds sparse products, which format each matrix class gets, the
rendered candidate, each format's plan decoded back to the matrix on the CPU, and the kernels built for Hopper.

The kernels' numbers are checked against cuSPARSE on the GPU (benchmarks/sparse.py): they need a device.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelbot.agents.rules import Rule, load_rules
from kernelbot.analysis.sparse import features
from kernelbot.analysis.tracer import analyze
from kernelbot.harness.staticcheck import scan
from kernelbot.render import render

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")

OPERATOR = """
import torch
from torch import nn

N = {n}


class Model(nn.Module):
    def forward(self, a, x, dense):
        y = torch.relu(torch.sparse.mm(a, x)) + a @ x  # two sparse products
        return y, dense @ dense[:, :{k}]  # a dense product stays as it is


def get_inputs():
    gen = torch.Generator().manual_seed(0)
    mask = torch.rand(N, N, generator=gen) < {density}
    a = torch.where(mask, torch.randn(N, N, generator=gen), torch.zeros(())).to_sparse_csr()
    return [a, torch.randn(N, {k}, generator=gen), torch.randn(N, N, generator=gen)]


def get_init_inputs():
    return []
"""

SPMV = """
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, a, v):
        return torch.mv(a, v) * 2


def get_inputs():
    n = 128
    i = torch.arange(n)
    band = torch.zeros(n, n)
    for k in (-1, 0, 1):
        rows = i[(i + k >= 0) & (i + k < n)]
        band[rows, rows + k] = torch.randn(rows.numel())
    return [band.to_sparse_csr(), torch.randn(n)]


def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def rules() -> dict[str, Rule]:
    return {r.id: r for r in load_rules() if r.produces.template == "sparse_spmm.py.j2"}


def _facts(tmp_path: Path, source: str) -> dict[str, Any]:
    (tmp_path / "op.py").write_text(source)
    job = {
        "kind": "kernelbench",
        "root": str(tmp_path),
        "file": "op.py",
        "device": "cpu",
        "allow_tf32": False,
    }
    return analyze(job, ["sparse_matmul"]) | {"eager_ms": 1.0}


def _render(rule: Rule, source: str, facts: dict[str, Any]) -> str:
    candidate = render(
        f"kernels/{rule.produces.template}",
        rule=rule,
        params=rule.produces.params,
        operator_source=source.rstrip(),
        facts=facts,
        device="cuda",
    )
    ast.parse(candidate)
    assert scan(candidate, allow_tf32=False, require_kernel=rule.require_kernel) == []
    return candidate


def _module(candidate: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(candidate.replace("import cupy\n", "cupy = None\n"), "candidate", "exec"), namespace)
    return namespace


def test_the_rewrite_replaces_sparse_products_only_and_the_forward_calls_the_kernel(
    tmp_path: Path, rules: dict[str, Rule]
) -> None:
    source = OPERATOR.format(n=64, k=4, density=0.05)
    facts = _facts(tmp_path, source)
    rewrite = facts["rewrites"]["sparse_matmul"]
    assert rewrite["applied"] and rewrite["description"].startswith("computed 2 sparse-times-dense")
    assert facts["sparse"]["rhs_cols"] == 4
    forward = _render(rules["sparse-cusparse-cupyx"], source, facts).split("class ModelNew(Model):")[1]
    assert forward.count("sparse_spmm(a, x)") == 2
    assert "matmul(dense, getitem)" in forward or "dense @ getitem" in forward  # the dense product is kept

    dense_only = OPERATOR.replace("torch.sparse.mm(a, x)", "x").replace("a @ x", "x")
    facts = _facts(tmp_path, dense_only.format(n=64, k=4, density=0.05))
    assert not facts["rewrites"]["sparse_matmul"]["applied"]
    assert (
        rules["sparse-cusparse-cupyx"].matches(facts, "cuda", "kernelbench", {})
        == "pattern not found in the graph"
    )


def test_the_vector_width_follows_the_mean_row_length(tmp_path: Path, rules: dict[str, Rule]) -> None:
    for density, width in ((0.02, 2), (0.1, 8), (0.45, 32)):  # means about 1.3, 6.4 and 29 at N = 64
        source = OPERATOR.format(n=64, k=1, density=density)
        candidate = _render(rules["sparse-csr-vector"], source, _facts(tmp_path, source))
        assert f"_VECTOR_WIDTH = {width}\n" in candidate and f"#define VECTOR_WIDTH {width}\n" in candidate


def _banded(n: int, half: int) -> torch.Tensor:
    i = torch.arange(n)
    dense = torch.zeros(n, n)
    for k in range(-half, half + 1):
        rows = i[(i + k >= 0) & (i + k < n)]
        dense[rows, rows + k] = torch.randn(rows.numel())
    return dense


def _power_law(n: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    lengths = (torch.arange(1, n + 1).double() ** -1.1 * n).long().clamp(1, n)
    dense = torch.zeros(n, n)
    for r in torch.randperm(n, generator=gen).tolist():
        dense[r, torch.randperm(n, generator=gen)[: int(lengths[r])]] = torch.randn(
            int(lengths[r]), generator=gen
        )
    return dense


def _uniform(n: int, per_row: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    dense = torch.zeros(n, n)
    for r in range(n):
        dense[r, torch.randperm(n, generator=gen)[:per_row]] = torch.randn(per_row, generator=gen)
    return dense


def _matching(rules: dict[str, Rule], matrix: torch.Tensor, rhs_cols: int) -> list[str]:
    facts = {
        "sparse": {**features(matrix.to_sparse_csr()), "rhs_cols": rhs_cols},
        "traceable": True,
        "input_dtypes": ["float32"],
        "rewrites": {"sparse_matmul": {"applied": True}},
    }
    return sorted(rid for rid, r in rules.items() if r.matches(facts, "cuda", "kernelbench", {}) is None)


def test_each_matrix_class_gets_the_formats_its_structure_suits(rules: dict[str, Rule]) -> None:
    n = 512
    banded = _matching(rules, _banded(n, 2), 1)
    assert "sparse-dia" in banded and "sparse-ell" in banded and "sparse-merge-path" not in banded
    regular = _matching(rules, _uniform(n, 12), 1)  # every row 12 long: ELL without padding, no diagonals
    assert {"sparse-ell", "sparse-sell", "sparse-csr-vector"} <= set(regular) and "sparse-dia" not in regular
    skewed = _matching(rules, _power_law(n), 1)
    assert "sparse-merge-path" in skewed and "sparse-ell" not in skewed and "sparse-dia" not in skewed
    assert "sparse-csr-rowwarp" not in skewed and "sparse-csr-rowwarp" in _matching(
        rules, _uniform(n, 12), 64
    )
    # a lane sums a long row alone: rejected by the float32 check on every power-law problem on two GPUs
    wide_skewed = _matching(rules, _power_law(n), 64)
    assert "sparse-csr-rowwarp" not in wide_skewed and "sparse-merge-path" in wide_skewed
    assert "sparse-csr-scalar" in _matching(rules, _uniform(n, 2), 1)
    assert _matching(rules, torch.randn(64, 64), 1) == []  # a full matrix: the dense fallback's case
    facts = {"sparse": features(_uniform(n, 12).to_sparse_csr()), "rewrites": {}}  # no operand found
    why = rules["sparse-csr-rowwarp"].match.sparse.why_not(facts["sparse"])  # type: ignore[union-attr]
    assert why == "no dense operand of the matrix's width among the inputs"


def _decode(fmt: str, plan: dict[str, Any], values: torch.Tensor, m: int, n: int) -> torch.Tensor:
    """The dense matrix a format's plan describes, read the way its kernel reads it (spmm.cu.j2)."""
    out = torch.zeros(m, n)
    if "pad" in plan:  # a padded format: each slot's value, padding zero
        slot_values = values[plan["src"].long()]
        slot_values[plan["pad"]] = 0
    if fmt in ("csr_scalar", "csr_vector", "csr_rowwarp", "merge_path", "cupyx"):
        crow, col = plan["crow"].tolist(), plan["col"].tolist()
        for r in range(m):
            for p in range(crow[r], crow[r + 1]):
                out[r, col[p]] += values[p]
    elif fmt == "ell":
        val = slot_values
        for s in range(plan["width"]):
            for r in range(m):
                out[r, plan["col"][s * m + r]] += val[s * m + r]
    elif fmt == "sell":
        val, ptr, width, perm = slot_values, plan["slice_ptr"], plan["slice_width"], plan["perm"]
        for i in range(m):
            s, lane = divmod(i, 32)
            for slot in range(int(width[s])):
                e = int(ptr[s]) + slot * 32 + lane
                out[int(perm[i]), plan["col"][e]] += val[e]
    elif fmt == "dia":
        val = slot_values
        for d, offset in enumerate(plan["offsets"].tolist()):
            for r in range(m):
                if 0 <= r + offset < n:
                    out[r, r + offset] += val[d * m + r]
    return out


@pytest.mark.parametrize(
    "fmt", ["csr_scalar", "csr_vector", "csr_rowwarp", "merge_path", "cupyx", "ell", "sell", "dia"]
)
def test_each_formats_plan_decodes_to_the_matrix_on_refreshed_values(tmp_path: Path, fmt: str) -> None:
    rule = next(r for r in load_rules() if r.produces.params.get("format") == fmt)
    facts = _facts(tmp_path, SPMV)
    namespace = _module(_render(rule, SPMV, facts))
    plan_of = namespace["_plan"]
    bf16 = _uniform(300, 5).bfloat16()  # a bfloat16 matrix: the plan is the pattern's, its values as they are
    for dense in (_banded(300, 3), _power_law(300), _uniform(300, 5), torch.zeros(40, 40), bf16):
        a = dense.to_sparse_csr()
        f = features(a)
        fill = {"ell": f["ell_fill"], "sell": f["sell_fill"], "dia": f["dia_fill"]}.get(fmt, 1.0)
        if f["nnz"] and f["nnz"] / fill > 8 * f["nnz"] + f["rows"]:  # a padded format mostly padding: refused
            with pytest.raises(
                ValueError, match=f"{fmt.upper()} would store .* slots for {f['nnz']} nonzeros"
            ):
                plan_of(a)
            continue
        plan = plan_of(a)
        assert torch.equal(_decode(fmt, plan, a.values(), *a.shape), dense.float())
        if "pad" in plan:  # the values the kernel gets, gathered as every call gathers them
            expected = a.values()[plan["src"].long()].index_fill_(0, plan["pad"], 0)
            assert torch.equal(namespace["_gather"](plan, a.values()), expected)
            assert plan["pad"].numel() == plan["src"].numel() - a.values().numel()
        a.values().copy_(torch.randn(a.values().shape))  # a refresh: new values on the kept pattern
        assert plan_of(a) is plan  # the plan is built once per matrix...
        assert torch.equal(
            _decode(fmt, plan, a.values(), *a.shape), a.to_dense().float()
        )  # ...and still fits
        assert plan_of(a.to_dense().to_sparse_csr()) is not plan  # another matrix, another plan


def test_the_candidate_refuses_what_it_was_not_built_for_in_one_line(
    tmp_path: Path, rules: dict[str, Rule]
) -> None:
    namespace = _module(_render(rules["sparse-ell"], SPMV, _facts(tmp_path, SPMV)))
    a = _banded(16, 1).to_sparse_csr()
    with pytest.raises(
        ValueError,
        match=r"sparse_spmm: built for CUDA operands of one dtype, float32 or bfloat16, .* \(CuPy is missing\)",
    ):
        namespace["sparse_spmm"](a, torch.randn(16))
    with pytest.raises(ValueError, match=r"built for a 2-D CSR matrix, got torch.sparse_csc"):
        namespace["_plan"](_banded(16, 1).to_sparse_csc())
    with pytest.raises(
        ValueError, match=r"built for float32 or bfloat16 values and int32 indices, got torch.float64"
    ):
        namespace["_plan"](_banded(16, 1).double().to_sparse_csr())


# The `#define`s the candidate puts before its source for a float32 matrix and operand, and for a bfloat16
# pair (sparse_spmm.py.j2's `defines`).
ELEMENTS = {
    "float32": "#define VAL_T float\n#define X_T float\n",
    "bfloat16": "#define VAL_T unsigned short\n#define X_T unsigned short\n",
}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc to compile the generated kernels for a GPU")
@pytest.mark.parametrize("elements", list(ELEMENTS))
def test_every_sparse_kernel_builds_for_hopper_without_spills(
    tmp_path: Path, rules: dict[str, Rule], elements: str
) -> None:
    candidate = _render(rules["sparse-ell"], SPMV, _facts(tmp_path, SPMV))
    cuda = re.search(r'_SOURCE = r"""(.*?)"""', candidate, re.S)
    assert cuda is not None
    (tmp_path / "k.cu").write_text(ELEMENTS[elements] + cuda.group(1))
    built = subprocess.run(
        [
            "nvcc",
            "-arch=sm_90",
            "-cubin",
            "-Xptxas",
            "-v",
            "-o",
            str(tmp_path / "k.cubin"),
            str(tmp_path / "k.cu"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    entries = set(re.findall(r"Compiling entry function '(\w+)'", built.stderr))
    kernels = {"csr_scalar", "csr_vector", "csr_rowwarp", "ell", "sell", "dia", "merge_path"}
    assert entries == {f"spmm_{k}" for k in kernels}
    assert set(re.findall(r"(\d+) bytes spill stores", built.stderr)) == {"0"}


def test_a_sparse_product_is_rewritten_only_when_the_operand_has_the_matrixs_dtype() -> None:
    """float32 and bfloat16 pairs become kernel calls; a mixed pair stays torch's (the kernels read one dtype
    for x). The dtypes are set on the traced graph: torch has no bfloat16 sparse product on the CPU."""
    from torch import fx
    from torch.fx.passes.shape_prop import ShapeProp

    from kernelbot.analysis.rewrites_sparse import sparse_matmul

    class Product(torch.nn.Module):
        def forward(self, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return torch.sparse.mm(a, x)

    for a_dtype, x_dtype, applied in (
        (torch.float32, torch.float32, True),
        (torch.bfloat16, torch.bfloat16, True),
        (torch.bfloat16, torch.float32, False),
        (torch.float64, torch.float64, False),
    ):
        gm = fx.symbolic_trace(Product())
        ShapeProp(gm).propagate(_banded(16, 1).to_sparse_csr(), torch.randn(16, 3))
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for node, dtype in zip(placeholders, (a_dtype, x_dtype), strict=True):
            node.meta["tensor_meta"] = node.meta["tensor_meta"]._replace(dtype=dtype)
        assert (sparse_matmul(gm) is not None) is applied, (a_dtype, x_dtype)


def test_a_bfloat16_operator_gets_the_kernels_that_read_it_and_not_cupyx(rules: dict[str, Rule]) -> None:
    banded = {
        "sparse": {**features(_banded(512, 2).to_sparse_csr()), "rhs_cols": 1},
        "traceable": True,
        "input_dtypes": ["bfloat16"],
        "rewrites": {"sparse_matmul": {"applied": True}},
    }
    assert rules["sparse-dia"].matches(banded, "cuda", "kernelbench", {}) is None
    assert rules["sparse-ell"].matches(banded, "cuda", "kernelbench", {}) is None
    assert rules["sparse-cusparse-cupyx"].matches(banded, "cuda", "kernelbench", {}) is not None  # no bf16
