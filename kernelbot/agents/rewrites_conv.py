"""torch.fx rewrites for convolution stacks (conv_bn_fold); importing this module registers them.

NOTE: a folded convolution's weights depend on the live parameters, which the harness loads after
construction, so the rewrite never bakes values: it routes each Conv→BatchNorm pair through `conv_bn_fold`,
a helper the candidate template defines, which folds from the modules themselves on the first eval call.
"""

from __future__ import annotations

import torch
from torch import fx, nn

from kernelbot.agents.rewrites import finish, register

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
        node.replace_all_uses_with(fused)
        gm.graph.erase_node(node)
        gm.graph.erase_node(conv_node)
        pairs.append(f"{conv_node.target}+{node.target}")
    return finish(
        gm,
        len(pairs),
        f"folded {len(pairs)} BatchNorm(s) into the preceding convolution ({', '.join(pairs)})",
    )
