"""torch.fx rewrite for sparse-times-dense products (sparse_matmul); importing this module registers it.

Each product of a 2-D sparse matrix (CSR and the other compressed layouts trace with no strides) and a dense
vector or matrix of its dtype (float32 or bfloat16) becomes a call to `sparse_spmm`, which the candidate template (sparse_spmm.py.j2)
defines with one of its storage formats (CSR-scalar, CSR-vector, ELL, SELL-C-sigma, DIA, merge path, or
cuSPARSE through CuPy). The stand-in below is torch's own product, so the analysis's dry run computes what
the operator computes.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx

from kernelbot.analysis.rewrites import finish, register, replace_node

DTYPES = (torch.float32, torch.bfloat16)  # the template's kernels read both (and sum in float32)
FUNCTIONS = {torch.sparse.mm, torch.mm, torch.matmul, operator.matmul, torch.mv, torch.spmm}
METHODS = {"mm", "matmul", "mv"}


def sparse_spmm_helper(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Stand-in for the template's `sparse_spmm`: A @ x for a 1-D (SpMV) or 2-D (SpMM) dense x."""
    return torch.mv(a, x) if x.dim() == 1 else torch.sparse.mm(a, x)


# The generated forward names a call_function target `<module>_<name>`: this spelling makes it `sparse_spmm`.
sparse_spmm_helper.__module__ = "sparse"
sparse_spmm_helper.__name__ = sparse_spmm_helper.__qualname__ = "spmm"


def _meta(node: object) -> Any:
    return getattr(node, "meta", {}).get("tensor_meta")


def _is_sparse_matrix(node: object) -> bool:
    meta = _meta(node)
    # ShapeProp records no strides for a sparse tensor; a dense tensor always has them.
    return meta is not None and len(meta.shape) == 2 and tuple(meta.stride) == () and meta.dtype in DTYPES


def _is_dense_operand(node: object, matrix: Any) -> bool:
    meta = _meta(node)
    return (
        meta is not None
        and tuple(meta.stride) != ()
        and meta.dtype == matrix.dtype
        and len(meta.shape) in (1, 2)
        and meta.shape[0] == matrix.shape[1]
    )


def _operands(node: fx.Node) -> tuple[fx.Node, fx.Node] | None:
    if node.kwargs or len(node.args) != 2:
        return None
    if not (
        (node.op == "call_function" and node.target in FUNCTIONS)
        or (node.op == "call_method" and node.target in METHODS)
    ):
        return None
    a, x = node.args
    if not isinstance(a, fx.Node) or not isinstance(x, fx.Node) or not _is_sparse_matrix(a):
        return None
    return (a, x) if _is_dense_operand(x, _meta(a)) else None


@register("sparse_matmul")
def sparse_matmul(gm: fx.GraphModule) -> str | None:
    """sparse A @ dense x (torch.sparse.mm, mm, matmul, @, mv) becomes the template's format-specific kernel."""
    changed = 0
    for node in list(gm.graph.nodes):
        found = _operands(node)
        if found is None:
            continue
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(sparse_spmm_helper, found)
            new.meta = dict(node.meta)
        replace_node(gm, node, new)
        changed += 1
    return finish(
        gm, changed, f"computed {changed} sparse-times-dense product(s) with a kernel for the matrix"
    )
