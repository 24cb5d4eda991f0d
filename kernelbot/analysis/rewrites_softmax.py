"""torch.fx rewrite for row softmax (row_softmax); importing this module registers it.

Each float32 softmax or log-softmax over the last dimension becomes a call to `row_softmax`, which the candidate
template defines as one CUDA kernel: a block a row, the row held in registers, so each element is read once and
written once. The stand-in below is exact, so the analysis's dry run computes what the operator computes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import fx, nn

from kernelbot.analysis.rewrites import finish, register, replace_node

MAX_COLS = 16384  # the template's widest kernel: 256 threads, 16 float4 registers each (32 spill on sm_90)
FUNCTIONS = {torch.softmax: False, F.softmax: False, torch.log_softmax: True, F.log_softmax: True}
METHODS = {"softmax": False, "log_softmax": True}
MODULES = {nn.Softmax: False, nn.LogSoftmax: True}


def row_softmax_helper(x: torch.Tensor, log: bool) -> torch.Tensor:
    """Stand-in for the template's `row_softmax`."""
    return torch.log_softmax(x, -1) if log else torch.softmax(x, -1)


# The generated forward names a call_function target `<module>_<name>`: this spelling makes it `row_softmax`.
row_softmax_helper.__module__ = "row"
row_softmax_helper.__name__ = row_softmax_helper.__qualname__ = "softmax"


def _call(gm: fx.GraphModule, node: fx.Node) -> tuple[fx.Node, object, bool] | None:
    """(input, dim, log) of a softmax or log-softmax call without a dtype argument; None for anything else."""
    found: tuple[object, object, bool] | None
    if not node.args:
        return None
    if node.op == "call_module":
        module = gm.get_submodule(str(node.target))
        found = (node.args[0], module.dim, MODULES[type(module)]) if type(module) in MODULES else None
    elif node.op == "call_function" and node.target in FUNCTIONS:
        found = (
            node.args[0],
            node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None),
            FUNCTIONS[node.target],
        )
    elif node.op == "call_method" and node.target in METHODS:
        found = (
            node.args[0],
            node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None),
            METHODS[str(node.target)],
        )
    else:
        return None
    # Positional arguments past dim (F.softmax's _stacklevel, then dtype) and a dtype keep the op where it is.
    extra = (
        set(node.kwargs) - {"dim", "_stacklevel"} - ({"dtype"} if node.kwargs.get("dtype") is None else set())
    )
    if found is None or not isinstance(found[0], fx.Node) or len(node.args) > 2 or extra:
        return None
    return found[0], found[1], bool(found[2])


def _fits(x: object, dim: object) -> bool:
    """A float32 input whose softmax dimension is its last, of a width the kernels take (a multiple of 4)."""
    meta = getattr(x, "meta", {}).get("tensor_meta")
    if meta is None or meta.dtype != torch.float32 or not meta.shape or not isinstance(dim, int):
        return False
    cols = meta.shape[-1]
    return dim in (-1, len(meta.shape) - 1) and cols % 4 == 0 and 0 < cols <= MAX_COLS


@register("row_softmax")
def row_softmax(gm: fx.GraphModule) -> str | None:
    """softmax(x, -1) and log_softmax(x, -1) become the template's one-pass row kernel."""
    changed = 0
    for node in list(gm.graph.nodes):
        found = _call(gm, node)
        if found is None or not _fits(found[0], found[1]):
            continue
        x, _, log = found
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(row_softmax_helper, (x, log))
            new.meta = dict(node.meta)
        replace_node(gm, node, new)
        changed += 1
    return finish(gm, changed, f"computed {changed} row softmax(es) as one kernel a row, each row read once")
