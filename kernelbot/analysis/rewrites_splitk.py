"""torch.fx rewrite for skinny linear layers (split_k_linear); importing this module registers it.

A linear layer over a few rows (a batch of 16 at serving time, a decoding step) is a GEMM whose output has
too few tiles to occupy a large GPU: each thread block walks the whole inner dimension while most
multiprocessors idle. Splitting the inner dimension into S slices gives S times the blocks, as one batched
product on views of the operands, and a sum of S partial results (the classic split-K GEMM). Exact in real
arithmetic; the sum is reassociated, which the harness checks at the float32 tolerance on fresh inputs.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn

from kernelbot.analysis.rewrites import finish, register, replace_node, unflatten_like

MAX_ROWS = 64  # rows of x (its leading dimensions) up to which a layer counts as skinny
MIN_SLICE = 256  # inner-dimension elements a slice keeps: each slice's product stays worth a thread block
MAX_SPLITS = 16


def splits(k: int) -> int:
    """The largest power of two S <= MAX_SPLITS dividing k with k / S >= MIN_SLICE (1: do not split)."""
    s = 1
    while s * 2 <= MAX_SPLITS and k % (s * 2) == 0 and k // (s * 2) >= MIN_SLICE:
        s *= 2
    return s


def _linear(gm: fx.GraphModule, node: fx.Node) -> tuple[Any, Any, Any] | None:
    """(x, weight, bias or None) of an nn.Linear call or an F.linear call, as graph values; else None.

    For a module, the parameters become get_attr nodes inserted before the call (the caller rewrites it).
    """
    if node.op == "call_module" and type(gm.get_submodule(str(node.target))) is nn.Linear:
        if len(node.args) != 1 or node.kwargs:
            return None
        name = str(node.target)
        with gm.graph.inserting_before(node):
            weight = gm.graph.get_attr(f"{name}.weight")
            bias = gm.graph.get_attr(f"{name}.bias") if gm.get_submodule(name).bias is not None else None
        return node.args[0], weight, bias
    if node.op == "call_function" and node.target is F.linear and 2 <= len(node.args) <= 3:
        return node.args[0], node.args[1], node.args[2] if len(node.args) == 3 else node.kwargs.get("bias")
    return None


def _skinny_k(node: object) -> int | None:
    """The inner dimension of a float32 input with at most MAX_ROWS rows, when it splits; else None."""
    meta = getattr(node, "meta", {}).get("tensor_meta")
    if meta is None or meta.dtype != torch.float32 or len(meta.shape) < 2:
        return None
    rows, k = math.prod(meta.shape[:-1]), meta.shape[-1]
    return k if rows <= MAX_ROWS and splits(k) > 1 else None


@register("split_k_linear")
def split_k_linear(gm: fx.GraphModule) -> str | None:
    """F.linear(x, W, b) over a few rows -> sum over s of x[:, slice s] @ W[:, slice s].T, one batched product."""
    names = []
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op not in ("call_module", "call_function") or not node.args:
            continue
        k = _skinny_k(node.args[0])
        operands = _linear(gm, node) if k is not None else None
        if operands is None or k is None:
            continue
        x, weight, bias = operands
        s = splits(k)
        with graph.inserting_before(node):
            xs = graph.call_method("transpose", (graph.call_method("reshape", (x, -1, s, k // s)), 0, 1))
            ws = graph.call_method(
                "permute", (graph.call_method("unflatten", (weight, 1, (s, k // s))), 1, 2, 0)
            )
            y = graph.call_method("sum", (graph.call_function(torch.bmm, (xs, ws)), 0))  # [rows, out]
            if bias is not None:
                y = graph.call_function(torch.add, (y, bias))
            out = unflatten_like(graph, y, 0, x, slice(None, -1))  # x's leading dimensions again
        replace_node(gm, node, out)
        names.append(f"{node.target if node.op == 'call_module' else node.name} (K {k} in {s})")
    return finish(
        gm,
        len(names),
        f"split the inner dimension of {len(names)} skinny linear layer(s): {', '.join(names)}",
    )
