"""torch.fx rewrite for float32 products emulated on TF32 Tensor Cores (tf32x3); importing it registers it.

Each float32 matrix product (matmul, mm, bmm, @, F.linear, nn.Linear) and each one-group, zero-padded
convolution module (Conv1d-3d, ConvTranspose1d-3d: a sum over input channels) is routed through a helper that the
candidate template defines (templates/kernels/tf32x3.py.j2): it splits each operand into two TF32 values,
x = hi + lo, and sums hi·hi + hi·lo + lo·hi in one TF32 product with float32 accumulation. The stand-ins below
are exact, so the analysis's dry run computes what the operator computes.
"""

from __future__ import annotations

import operator

import torch
import torch.nn.functional as F
from torch import fx, nn

from kernelbot.analysis.rewrites import finish, register, replace_node

PRODUCTS = {torch.matmul, torch.mm, torch.bmm, operator.matmul}
PRODUCT_METHODS = {"matmul", "mm", "bmm"}


def tf32x3_matmul_helper(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Stand-in for the template's `tf32x3_matmul`."""
    return torch.matmul(a, b)


def tf32x3_linear_helper(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """Stand-in for the template's `tf32x3_linear`."""
    return F.linear(x, weight, bias)


def tf32x3_conv_helper(conv: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Stand-in for the template's `tf32x3_conv`."""
    return conv(x)


CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)

# The generated forward names a call_function target `<module>_<name>`: these spellings make the names
# `tf32x3_matmul`, `tf32x3_linear` and `tf32x3_conv`, the helpers that templates/kernels/tf32x3.py.j2 defines.
for _helper, _name in (
    (tf32x3_matmul_helper, "matmul"),
    (tf32x3_linear_helper, "linear"),
    (tf32x3_conv_helper, "conv"),
):
    _helper.__module__ = "tf32x3"
    _helper.__name__ = _helper.__qualname__ = _name


def _float32(node: object) -> bool:
    meta = getattr(node, "meta", {}).get("tensor_meta")
    return meta is not None and meta.dtype == torch.float32


def _product_args(gm: fx.GraphModule, node: fx.Node) -> tuple[object, tuple[object, ...]] | None:
    """(helper, args) for a float32 product node; None for anything else."""
    if node.kwargs:
        return None
    if (node.op == "call_function" and node.target in PRODUCTS) or (
        node.op == "call_method" and node.target in PRODUCT_METHODS
    ):
        if len(node.args) == 2 and all(_float32(a) for a in node.args):
            return tf32x3_matmul_helper, tuple(node.args)
        return None
    if node.op == "call_function" and node.target is F.linear and 2 <= len(node.args) <= 3:
        x, weight = node.args[0], node.args[1]
        bias = node.args[2] if len(node.args) == 3 else None
        return (tf32x3_linear_helper, (x, weight, bias)) if _float32(x) and _float32(weight) else None
    if node.op == "call_module" and isinstance(gm.get_submodule(str(node.target)), nn.Linear):
        if len(node.args) != 1 or not _float32(node.args[0]):
            return None
        module = gm.get_submodule(str(node.target))
        if module.weight.dtype != torch.float32:
            return None
        weight = gm.graph.get_attr(f"{node.target}.weight")
        bias = gm.graph.get_attr(f"{node.target}.bias") if module.bias is not None else None
        return tf32x3_linear_helper, (node.args[0], weight, bias)
    if node.op == "call_module" and type(gm.get_submodule(str(node.target))) in CONVS:
        conv = gm.get_submodule(str(node.target))
        plain = conv.groups == 1 and conv.padding_mode == "zeros" and conv.weight.dtype == torch.float32
        # Groups would interleave their channels in the tripled input; an output_size argument is not passed on.
        if len(node.args) != 1 or not plain or not _float32(node.args[0]):
            return None
        return tf32x3_conv_helper, (gm.graph.get_attr(str(node.target)), node.args[0])
    return None


@register("tf32x3_products")
def tf32x3_products(gm: fx.GraphModule) -> str | None:
    """Every float32 matrix product and convolution becomes the template's three-TF32-product helper."""
    changed = 0
    for node in list(gm.graph.nodes):
        with gm.graph.inserting_before(node):
            found = _product_args(gm, node)
            if found is None:
                continue
            helper, args = found
            new = gm.graph.call_function(helper, args)  # type: ignore[arg-type]
            new.meta = dict(node.meta)  # its shape and dtype, for the products that consume it
        replace_node(gm, node, new)
        changed += 1
    return finish(
        gm,
        changed,
        f"computed {changed} float32 matrix product(s) or convolution(s) as three TF32 Tensor Core products"
        " (hi·hi + hi·lo + lo·hi)",
    )
