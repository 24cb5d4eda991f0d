"""torch.fx rewrites for convolution stacks (conv_bn_fold, conv1x1_matmul); importing this module registers them.

NOTE: a folded convolution's weights depend on the live parameters, which the harness loads after
construction, so the rewrite never bakes values: it routes each Conv→BatchNorm pair through `conv_bn_fold`,
a helper the candidate template defines, which folds from the modules themselves on the first eval call.
"""

from __future__ import annotations

import torch
from torch import fx, nn

from kernelbot.analysis.rewrites import finish, register, replace_node, unflatten_like

CONV_BN: dict[type[nn.Module], type[nn.Module]] = {
    nn.Conv1d: nn.BatchNorm1d,
    nn.Conv2d: nn.BatchNorm2d,
    nn.Conv3d: nn.BatchNorm3d,
}


def conv_bn_fold_helper(conv: nn.Module, bn: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Stand-in for the template's helper of the same generated name; exact (unfolded) so a dry run agrees."""
    return bn(conv(x))


# The generated forward names a call_function target `<module>_<name>`: this spelling makes it `conv_bn_fold`,
# the helper that templates/kernels/conv_bn_fold.py.j2 defines.
conv_bn_fold_helper.__module__ = "conv_bn"
conv_bn_fold_helper.__name__ = conv_bn_fold_helper.__qualname__ = "fold"
HELPER_NAME = "conv_bn_fold"


def _foldable(gm: fx.GraphModule, bn_node: fx.Node) -> fx.Node | None:
    """The conv node feeding this eval-foldable BatchNorm (and nothing else), or None."""
    if bn_node.op != "call_module" or len(bn_node.args) != 1 or bn_node.kwargs:
        return None
    bn = gm.get_submodule(str(bn_node.target))
    conv_node = bn_node.args[0]
    if not isinstance(conv_node, fx.Node) or conv_node.op != "call_module" or len(conv_node.users) != 1:
        return None
    conv = gm.get_submodule(str(conv_node.target))
    if CONV_BN.get(type(conv)) is not type(bn) or len(conv_node.args) != 1 or conv_node.kwargs:
        return None
    if not bn.track_running_stats or bn.running_mean is None or bn.num_features != conv.out_channels:
        return None
    return conv_node


@register("conv_bn_fold")
def conv_bn_fold(gm: fx.GraphModule) -> str | None:
    """conv → BatchNorm (eval) becomes one convolution with folded weight and bias (computed lazily)."""
    pairs = []
    for node in list(gm.graph.nodes):
        conv_node = _foldable(gm, node)
        if conv_node is None:
            continue
        with gm.graph.inserting_before(node):
            conv = gm.graph.get_attr(str(conv_node.target))
            bn = gm.graph.get_attr(str(node.target))
            fused = gm.graph.call_function(conv_bn_fold_helper, (conv, bn, conv_node.args[0]))
        replace_node(gm, node, fused)
        gm.graph.erase_node(conv_node)
        pairs.append(f"{conv_node.target}+{node.target}")
    return finish(
        gm,
        len(pairs),
        f"folded {len(pairs)} BatchNorm(s) into the preceding convolution ({', '.join(pairs)})",
    )


def _pointwise_conv2d(gm: fx.GraphModule, node: fx.Node) -> nn.Conv2d | None:
    """The Conv2d module of a call that is a plain 1×1 convolution (stride 1, no padding, one group), or None."""
    if node.op != "call_module" or len(node.args) != 1 or node.kwargs:
        return None
    conv = gm.get_submodule(str(node.target))
    if type(conv) is not nn.Conv2d:
        return None
    plain = (
        conv.kernel_size == (1, 1) and conv.stride == (1, 1) and conv.dilation == (1, 1) and conv.groups == 1
    )
    meta = getattr(node.args[0], "meta", {}).get("tensor_meta")
    four_d = meta is not None and len(meta.shape) == 4  # an unbatched (3-d) input keeps the convolution
    return conv if plain and conv.padding in ((0, 0), "valid") and four_d else None


@register("conv1x1_matmul")
def conv1x1_matmul(gm: fx.GraphModule) -> str | None:
    """A 1×1 Conv2d becomes W[Cout, Cin] @ x[N, Cin, H*W] (+ bias): one batched GEMM on views, no im2col."""
    names = []
    for node in list(gm.graph.nodes):
        conv = _pointwise_conv2d(gm, node)
        if conv is None:
            continue
        x = node.args[0]
        graph = gm.graph
        with graph.inserting_before(node):
            weight = graph.call_method("flatten", (graph.get_attr(f"{node.target}.weight"), 1))
            y = graph.call_function(torch.matmul, (weight, graph.call_method("flatten", (x, 2))))
            if conv.bias is not None:
                bias = graph.call_method("unsqueeze", (graph.get_attr(f"{node.target}.bias"), -1))
                y = graph.call_function(torch.add, (y, bias))
            out = unflatten_like(graph, y, 2, x, slice(2, None))  # [N, Cout, H, W]
        replace_node(gm, node, out)
        names.append(str(node.target))
    return finish(
        gm,
        len(names),
        f"computed {len(names)} 1x1 convolution(s) as a batched matrix product ({', '.join(names)})",
    )
