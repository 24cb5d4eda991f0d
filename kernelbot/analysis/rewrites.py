"""torch.fx rewrites named by rules (produces.rewrite): each returns a one-line description when it changed the graph.

Every rewrite is exact in real arithmetic; the harness still checks each candidate on fresh inputs, since
floating-point reassociation can move results by rounding.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from torch import fx

Rewrite = Callable[[fx.GraphModule], str | None]
REWRITES: dict[str, Rewrite] = {}

MATMULS = {torch.matmul, torch.mm, operator.matmul}


def register(name: str) -> Callable[[Rewrite], Rewrite]:
    def wrap(fn: Rewrite) -> Rewrite:
        if name in REWRITES and REWRITES[name] is not fn:
            raise ValueError(f"two rewrites are registered as {name!r}: rename one")
        REWRITES[name] = fn
        return fn

    return wrap


def all_rewrites() -> dict[str, Rewrite]:
    """Every registered rewrite: this module's and those of each kernelbot/analysis/rewrites_*.py, found by
    name, so a new rewrite module needs no import anywhere else."""
    import importlib
    import pkgutil

    import kernelbot.analysis as analysis

    for module in pkgutil.iter_modules(analysis.__path__):
        if module.name.startswith("rewrites_"):
            importlib.import_module(f"kernelbot.analysis.{module.name}")
    return REWRITES


def _shape(node: object) -> tuple[int, ...] | None:
    meta = getattr(node, "meta", {}).get("tensor_meta")
    return tuple(meta.shape) if meta is not None else None


def _is_matmul(node: fx.Node) -> bool:
    return (node.op == "call_function" and node.target in MATMULS) or (
        node.op == "call_method" and node.target in ("matmul", "mm")
    )


def _is_diag_of_vector(node: object) -> bool:
    if not isinstance(node, fx.Node) or node.op not in ("call_function", "call_method"):
        return False
    if node.target not in (torch.diag, torch.diag_embed, "diag", "diag_embed") or len(node.args) != 1:
        return False
    source = node.args[0]
    return _shape(source) is not None and len(_shape(source) or ()) == 1


def replace_node(gm: fx.GraphModule, node: fx.Node, new: fx.Node) -> None:
    """Every use of `node` becomes `new`, and `node` leaves the graph."""
    node.replace_all_uses_with(new)
    gm.graph.erase_node(node)


def unflatten_like(graph: fx.Graph, y: fx.Node, dim: int, x: Any, part: slice) -> fx.Node:
    """y.unflatten(dim, x.shape[part]) as graph nodes: sizes read from x at run time, not baked from the trace."""
    sizes = graph.call_function(operator.getitem, (graph.call_function(getattr, (x, "shape")), part))
    return graph.call_method("unflatten", (y, dim, sizes))


def finish(gm: fx.GraphModule, changed: int, description: str) -> str | None:
    """Recompile a changed graph and describe the change; None when the pattern was not found."""
    if not changed:
        return None
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    return description


@register("diag_matmul")
def diag_matmul(gm: fx.GraphModule) -> str | None:
    """diag(v) @ X -> v[:, None] * X and X @ diag(v) -> X * v: no n×n matrix, O(n²) instead of O(n³)."""
    changed = 0
    for node in list(gm.graph.nodes):
        if not _is_matmul(node) or len(node.args) != 2:
            continue
        left, right = node.args
        with gm.graph.inserting_before(node):
            if _is_diag_of_vector(left) and isinstance(left, fx.Node):
                column = gm.graph.call_method("unsqueeze", (left.args[0], -1))
                new = gm.graph.call_function(torch.mul, (column, right))
            elif _is_diag_of_vector(right) and isinstance(right, fx.Node):
                new = gm.graph.call_function(torch.mul, (left, right.args[0]))
            else:
                continue
        replace_node(gm, node, new)
        changed += 1
    return finish(gm, changed, f"replaced {changed} diagonal-matrix product(s) by a broadcast scale")


def _last_dim_reduction(node: fx.Node) -> str | None:
    """ "sum" or "mean" when the node reduces over the last dimension (dim=-1 or ndim-1) with no dtype change."""
    kind = next(
        (
            name
            for name, fn in (("sum", torch.sum), ("mean", torch.mean))
            if (node.op == "call_function" and node.target is fn)
            or (node.op == "call_method" and node.target == name)
        ),
        None,
    )
    return kind if kind is not None and _over_last_dim(node) else None


def _over_last_dim(node: fx.Node) -> bool:
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
    source = node.args[0]
    shape = _shape(source)
    if shape is None or dim is None or "dtype" in node.kwargs:
        return False
    dims = dim if isinstance(dim, tuple | list) else (dim,)
    return len(dims) == 1 and isinstance(dims[0], int) and dims[0] % len(shape) == len(shape) - 1


SCALES = {operator.mul, operator.truediv, torch.mul, torch.div}


def _is_scalar_scale(node: object) -> bool:
    """x * c, c * x or x / c with c a Python number, x a node used only here: linear, so it commutes with a sum."""
    if not isinstance(node, fx.Node) or node.op != "call_function" or node.target not in SCALES:
        return False
    if node.kwargs or len(node.args) != 2:
        return False
    a, b = node.args
    numbers = (int, float)
    if node.target in (operator.truediv, torch.div):
        return isinstance(a, fx.Node) and isinstance(b, numbers) and b != 0
    return (isinstance(a, fx.Node) and isinstance(b, numbers)) or (
        isinstance(b, fx.Node) and isinstance(a, numbers)
    )


def _through_scalar_scales(node: object) -> tuple[object, list[fx.Node]]:
    """The node under a chain of scalar scalings (each used once), and the scalings, outermost first."""
    scales: list[fx.Node] = []
    while _is_scalar_scale(node) and isinstance(node, fx.Node) and len(node.users) == 1:
        scales.append(node)
        node = next(a for a in node.args if isinstance(a, fx.Node))
    return node, scales


@register("reduce_before_matmul")
def reduce_before_matmul(gm: fx.GraphModule) -> str | None:
    """sum(A @ B, dim=-1) -> A @ B.sum(-1): the reduction moves before the product (exact in real arithmetic).

    Also F.linear(x, W, b).sum(-1) -> x @ W.sum(0) + b.sum(): one matrix-vector product instead of a GEMM;
    a mean likewise (x @ W.mean(0) + b.mean()), since the product is linear in each operand. Scalings by a
    constant between the product and the reduction ((x @ W.T / t).mean(-1)) are kept, applied after it.
    """
    changed = 0
    for node in list(gm.graph.nodes):
        reduce = _last_dim_reduction(node)
        if reduce is None:
            continue
        product, scales = _through_scalar_scales(node.args[0])
        if not isinstance(product, fx.Node) or len(product.users) != 1:
            continue
        keepdim = bool(node.kwargs.get("keepdim", node.args[2] if len(node.args) > 2 else False))
        with gm.graph.inserting_before(node):
            if _is_matmul(product) and len(product.args) == 2:
                a, b = product.args
                b_shape = _shape(b)
                if b_shape is None or len(b_shape) < 2:
                    continue
                vector = gm.graph.call_method(reduce, (b, -1))
                new = gm.graph.call_function(torch.matmul, (a, vector))
            elif (product.op == "call_function" and product.target is torch.nn.functional.linear) or (
                product.op == "call_module"
                and isinstance(gm.get_submodule(str(product.target)), torch.nn.Linear)
            ):
                weight: Any
                bias: Any
                if product.op == "call_module":
                    module = str(product.target)
                    x = product.args[0]
                    weight = gm.graph.get_attr(f"{module}.weight")
                    has_bias = gm.get_submodule(module).bias is not None
                    bias = gm.graph.get_attr(f"{module}.bias") if has_bias else None
                else:
                    x, weight = product.args[0], product.args[1]
                    bias = product.args[2] if len(product.args) > 2 else product.kwargs.get("bias")
                vector = gm.graph.call_method(reduce, (weight, 0))
                new = gm.graph.call_function(torch.matmul, (x, vector))
                if bias is not None:
                    new = gm.graph.call_function(torch.add, (new, gm.graph.call_method(reduce, (bias,))))
            else:
                continue
            for scale in reversed(scales):  # innermost first: c·sum(y) = sum(c·y), sum(y)/c = sum(y/c)
                assert callable(scale.target)  # a call_function node (_is_scalar_scale)
                new = gm.graph.call_function(
                    scale.target, tuple(new if isinstance(a, fx.Node) else a for a in scale.args)
                )
            if keepdim:
                new = gm.graph.call_method("unsqueeze", (new, -1))
        replace_node(gm, node, new)
        changed += 1
    return finish(gm, changed, f"moved {changed} last-dimension sum(s)/mean(s) before the matrix product")


def _flops(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """2·m·k·n for 2-D operands (batch dims multiply)."""
    batch = 1
    for d in a[:-2]:
        batch *= d
    return 2 * batch * a[-2] * a[-1] * b[-1]


@register("matmul_reassociate")
def matmul_reassociate(gm: fx.GraphModule) -> str | None:
    """(A @ B) @ C -> A @ (B @ C) (or back) when the other order needs fewer FLOPs, from the traced shapes."""
    changed = 0
    for node in list(gm.graph.nodes):
        if not _is_matmul(node) or len(node.args) != 2:
            continue
        left, c = node.args
        if (
            not isinstance(left, fx.Node)
            or not _is_matmul(left)
            or len(left.users) != 1
            or len(left.args) != 2
        ):
            continue
        a, b = left.args
        sa, sb, sc = _shape(a), _shape(b), _shape(c)
        if not sa or not sb or not sc or min(len(sa), len(sb), len(sc)) != 2:
            continue
        now = _flops(sa, sb) + _flops((sa[0], sb[1]), sc)
        other = _flops(sb, sc) + _flops(sa, (sb[0], sc[1]))
        if other * 1.2 >= now:  # keep the order unless the other one is clearly cheaper
            continue
        with gm.graph.inserting_before(node):
            bc = gm.graph.call_function(torch.matmul, (b, c))
            new = gm.graph.call_function(torch.matmul, (a, bc))
        replace_node(gm, node, new)
        changed += 1
    return finish(gm, changed, f"re-associated {changed} matmul chain(s) to the cheaper order by FLOP count")
