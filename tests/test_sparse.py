"""Sparse operators: a matrix's structure features, rules that match on them, and the harness's handling of
sparse matrix inputs (refreshed values on a kept pattern)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kernelbot.agents.rules import Match, Produces, Rule, SparseMatch, load_rules
from kernelbot.analysis.sparse import features, first_sparse
from kernelbot.cli import main
from kernelbot.harness.inputs import Failure, clone, nbytes, parts, refresh, same_tensor
from kernelbot.pipeline.detect import detect
from tests.gitrepo_builder import GitRepoBuilder
from tests.ops import write_repo

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")


def _csr(dense: torch.Tensor) -> torch.Tensor:
    return dense.to_sparse_csr()


def test_features_of_a_diagonal_a_banded_and_a_block_sparse_matrix() -> None:
    diag = features(_csr(torch.diag(torch.arange(1.0, 65.0))))
    assert diag["nnz"] == 64 and diag["density"] == pytest.approx(1 / 64)
    assert diag["diagonal_share"] == 1.0 and diag["bandwidth"] == 0 and diag["row_nnz_std"] == 0.0
    assert diag["block_density_4"] == pytest.approx(4 / 16)  # each 4x4 block on the diagonal holds 4 of 16

    n = 100
    i = torch.arange(n)
    band = torch.zeros(n, n)
    for k in (-2, -1, 0, 1, 2):
        rows = i[(i + k >= 0) & (i + k < n)]
        band[rows, rows + k] = 1.0
    b = features(_csr(band))
    assert b["bandwidth"] == 2 and b["bandwidth_share"] == pytest.approx(3 / n)
    assert b["row_nnz_max"] == 5 and b["nnz"] == 5 * n - 6 and b["empty_row_share"] == 0.0

    blocks = torch.zeros(64, 64)
    blocks[0:8, 8:16] = 1.0
    blocks[32:40, 48:56] = 2.0
    f = features(_csr(blocks))
    assert f["block_density_8"] == 1.0 and f["block_density_16"] == pytest.approx(0.25)
    assert f["empty_row_share"] == pytest.approx(48 / 64)


def test_power_law_rows_are_skewed_and_other_layouts_give_the_same_features() -> None:
    gen = torch.Generator().manual_seed(0)
    n = 256
    lengths = (torch.arange(1, n + 1).double() ** -1.2 * n).long().clamp(min=1)  # a few long rows, many short
    dense = torch.zeros(n, n)
    for r, length in enumerate(lengths.tolist()):
        dense[r, torch.randperm(n, generator=gen)[:length]] = 1.0
    f = features(_csr(dense))
    assert f["row_nnz_skew"] > 3 and f["row_nnz_max"] == int(lengths.max())
    assert features(dense.to_sparse_csc()) == f
    stored_blocks = int((dense.reshape(n // 2, 2, n // 2, 2).abs().sum((1, 3)) > 0).sum())
    assert (
        features(dense.to_sparse_bsr((2, 2)))["nnz"] == 4 * stored_blocks
    )  # a block's zeros count as stored
    assert first_sparse([torch.randn(3), dense.to_sparse_csr(), 2]) is not None
    assert first_sparse([torch.randn(3), 2]) is None


def _rule(**sparse: float) -> Rule:
    return Rule(
        id="r", description="d", rationale="r", match=Match(sparse=SparseMatch(**sparse)),
        produces=Produces(template="sparse_dense.py.j2"),
    )  # fmt: skip


def test_rules_match_on_the_structure_and_never_without_a_sparse_input() -> None:
    full = features(_csr(torch.where(torch.rand(64, 64) < 0.5, 1.0, 0.0)))
    thin = features(_csr(torch.eye(64)))
    rule = _rule(min_density=0.1)
    facts = {"eager_ms": 1.0}
    assert rule.matches({**facts, "sparse": full}, "cpu", "kernelbench", {}) is None
    why = rule.matches({**facts, "sparse": thin}, "cpu", "kernelbench", {})
    assert why is not None and why.startswith("matrix structure: density")
    assert rule.matches(facts, "cpu", "kernelbench", {}) == "matrix structure: needs a sparse matrix input"
    banded = _rule(max_bandwidth_share=0.05)
    assert banded.matches({**facts, "sparse": thin}, "cpu", "kernelbench", {}) is None
    assert banded.matches({**facts, "sparse": full}, "cpu", "kernelbench", {}) is not None
    shipped = {r.id: r for r in load_rules()}["sparse-dense-fallback"]
    assert shipped.matches({**facts, "sparse": full}, "cuda", "kernelbench", {}) is None
    assert shipped.matches({**facts, "sparse": thin}, "cuda", "kernelbench", {}) is not None


def test_a_refresh_draws_a_sparse_inputs_values_anew_and_keeps_its_pattern() -> None:
    dense = torch.where(torch.rand(300, 300) < 0.05, torch.randn(300, 300), torch.zeros(()))
    master = [dense.to_sparse_csr(), torch.randn(300, 4)]
    work = clone(master)
    work[0].values().zero_()  # what a subject's write into its input would leave
    work[0].col_indices().zero_()
    refresh([work], [master], seed=7)
    (crow, col, values), (mcrow, mcol, mvalues) = parts(work[0]), parts(master[0])
    assert torch.equal(crow, mcrow) and torch.equal(col, mcol)  # the pattern is the master's again
    assert not torch.equal(values, mvalues)  # the values are drawn anew...
    assert bool(torch.isin(values, mvalues).all())  # ...from the master's
    assert same_tensor(master[0], master[0].clone()) and not same_tensor(master[0], work[0])
    assert nbytes(master) == sum(p.numel() * p.element_size() for p in parts(master[0])) + 300 * 4 * 4


def test_a_coo_input_is_one_line_naming_the_fix() -> None:
    with pytest.raises(Failure, match=r"convert it in get_inputs\(\), e.g. .to_sparse_csr\(\)"):
        parts(torch.eye(3).to_sparse_coo())


# -- a sparse operator through the harness and through detection ----------------------------------------

SPMV = '''
"""SpMV: y = A @ x, A a random CSR matrix."""

import torch
from torch import nn

N = 256


class Model(nn.Module):
    def forward(self, a, x):
        return torch.sparse.mm(a, x)


def get_inputs():
    dense = torch.where(torch.rand(N, N) < 0.05, torch.randn(N, N), torch.zeros(()))
    return [dense.to_sparse_csr(), torch.randn(N, 1)]


def get_init_inputs():
    return []
'''

SPMV_ROWWISE = """
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, x):  # the same product, row by row from the CSR arrays
        crow, col, val = a.crow_indices(), a.col_indices(), a.values()
        rows = torch.repeat_interleave(torch.arange(a.shape[0]), crow[1:] - crow[:-1])
        return torch.zeros(a.shape[0], x.shape[1]).index_add_(0, rows, val[:, None] * x[col])
"""

SPMV_TRANSPOSED = SPMV_ROWWISE.replace("x[col]", "x[rows]").replace(
    "index_add_(0, rows,", "index_add_(0, col,"
)


def test_a_sparse_operator_is_checked_and_a_candidate_verified_on_fresh_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = write_repo(
        tmp_path, {"ops/spmv.py": SPMV, "cand/rowwise.py": SPMV_ROWWISE, "cand/t.py": SPMV_TRANSPOSED}
    )
    monkeypatch.chdir(repo)
    out = tmp_path / "r.json"
    args = [
        "check",
        "ops/spmv.py",
        "--device",
        "cpu",
        "--no-compile",
        "--json",
        str(out),
    ]
    assert main([*args, "--candidate", str(repo / "cand/rowwise.py")]) == 0
    data = json.loads(out.read_text())
    assert data["reference"]["status"] == "ok" and data["candidate"]["status"] == "ok"
    assert main([*args, "--candidate", str(repo / "cand/t.py")]) == 1  # A^T x is not A x
    assert json.loads(out.read_text())["candidate"]["status"] == "incorrect"


def test_a_changed_sparse_operator_is_detected(tmp_path: Path) -> None:
    repo = GitRepoBuilder(tmp_path / "repo")
    base = repo.commit({"ops/spmv.py": SPMV}, "base")
    head = repo.commit({"ops/spmv.py": SPMV.replace("< 0.05", "< 0.02")}, "head")
    [change] = detect(repo.root, base, head)
    assert change.name == "ops/spmv" and change.change == "modified"


def test_the_cuda_graph_rule_stays_off_a_sparse_input() -> None:
    # A launch-bound SpMV on the H200 matched cuda-graph-capture, whose static buffers are strided copies:
    # the candidate crashed ("Sparse CSR tensors do not have strides").
    graph = {r.id: r for r in load_rules()}["cuda-graph-capture"]
    facts = {"eager_ms": 0.05, "gpu_busy": 0.5}
    assert graph.matches(facts, "cuda", "kernelbench", {}) is None
    sparse = {**facts, "sparse": features(_csr(torch.eye(64)))}
    assert graph.matches(sparse, "cuda", "kernelbench", {}) == "not for a sparse matrix input"


# -- a matrix that is the same every call, or new each call (SPARSE_MATRIX) -----------------------------


def test_a_per_call_matrix_is_a_new_object_over_new_indices_each_refresh() -> None:
    dense = torch.where(torch.rand(200, 200) < 0.05, torch.randn(200, 200), torch.zeros(()))
    master = [dense.to_sparse_csr(), torch.randn(200, 4)]
    kept, renewed = clone(master), clone(master)
    first = renewed[0]
    refresh([kept], [master], seed=11)
    refresh([renewed], [master], seed=11, renew=True)
    assert renewed[0] is not first and renewed[1] is not None
    assert same_tensor(renewed[0], kept[0])  # the same pattern and the same reordered values as without
    old, new = parts(first), parts(renewed[0])
    assert new[0].data_ptr() != old[0].data_ptr() and new[1].data_ptr() != old[1].data_ptr()
    assert new[2].data_ptr() == old[2].data_ptr()  # the values: refreshed in place, shared
    assert torch.equal(renewed[1], kept[1])  # dense inputs as ever


def test_static_only_formats_are_not_offered_for_a_per_call_matrix() -> None:
    band = torch.eye(256) + torch.diag(torch.ones(255), 1) + torch.diag(torch.ones(255), -1)
    facts = {"eager_ms": 1.0, "traceable": True, "rewrites": {"sparse_matmul": {"applied": True}}}
    static = {**facts, "sparse": {**features(_csr(band)), "rhs_cols": 1, "matrix": "static"}}
    per_call = {**static, "sparse": {**static["sparse"], "matrix": "per_call"}}
    rules = {r.id: r for r in load_rules()}
    dia, scalar = rules["sparse-dia"], rules["sparse-csr-scalar"]
    assert dia.matches(static, "cuda", "kernelbench", {}) is None
    why = dia.matches(per_call, "cuda", "kernelbench", {})
    assert why is not None and "conversion would be paid per call" in why
    assert scalar.matches(per_call, "cuda", "kernelbench", {}) is None  # a CSR kernel converts nothing


def test_an_unknown_sparse_matrix_declaration_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    from kernelbot.harness.loader import LoadError, Operator

    (tmp_path / "op.py").write_text(SPMV.replace("N = 256", "N = 256\nSPARSE_MATRIX = 'sometimes'"))
    with pytest.raises(LoadError, match=r"^op.py: SPARSE_MATRIX is 'sometimes'; set it to 'static'"):
        Operator({"kind": "kernelbench", "root": str(tmp_path), "file": "op.py", "device": "cpu"})


PLANNED = """
import time
import weakref

import torch
from torch import nn

_plans = {}  # id(matrix) -> (a weak reference to it, its row of each nonzero): built once per matrix object


def _rows(a):
    held = _plans.get(id(a))
    if held is not None and held[0]() is a:
        return held[1]
    time.sleep(0.02)  # a costly conversion, paid once per matrix object
    crow = a.crow_indices()
    rows = torch.repeat_interleave(torch.arange(a.shape[0]), crow[1:] - crow[:-1])
    _plans[id(a)] = (weakref.ref(a), rows)
    return rows


class ModelNew(nn.Module):
    def forward(self, a, x):
        rows = _rows(a)
        return torch.zeros(a.shape[0], x.shape[1]).index_add_(0, rows, a.values()[:, None] * x[a.col_indices()])
"""


def test_a_per_call_matrix_makes_every_timed_call_pay_the_conversion(tmp_path: Path) -> None:
    """The same candidate, planning once per matrix object (as the shipped sparse templates do): its 20 ms
    plan stays out of the timed calls of a static matrix and is in every one of a per-call matrix's."""
    from kernelbot.harness.evaluate import Settings, evaluate

    (tmp_path / "static.py").write_text(SPMV)
    (tmp_path / "per_call.py").write_text(SPMV.replace("N = 256", "N = 256\nSPARSE_MATRIX = 'per_call'"))
    (tmp_path / "planned.py").write_text(PLANNED)
    settings = Settings(time_budget_s=0.5, min_samples=10, max_samples=12, timeout_s=120)
    medians = {}
    for name in ("static", "per_call"):
        job = {"kind": "kernelbench", "root": str(tmp_path), "file": f"{name}.py", "device": "cpu",
               "allow_tf32": False, "atol": None, "rtol": None}  # fmt: skip
        ev = evaluate(job, "candidate", settings, candidate=str(tmp_path / "planned.py"))
        assert ev.ok and ev.timing is not None, (name, ev.reason)
        medians[name] = ev.timing.median_ms
    assert medians["static"] < 5.0 < 15.0 < medians["per_call"], medians
