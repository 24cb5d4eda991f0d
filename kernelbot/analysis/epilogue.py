"""Fused-epilogue analysis: the pointwise chain that ends a traced graph, as CUDA statements plus the PyTorch prefix.

The tracer stores `describe(gm, job)` as `facts["epilogue"]`; the `fused-elementwise-epilogue` rule renders it
into one CUDA kernel (templates/kernels/elementwise.cu.j2) launched after the prefix (fused_epilogue.py.j2).
The fused ops compute float32 values of the output's shape; the tensors they read may be float32 tensors of a shape
that broadcasts to it (a bias, a per-channel scale), indexed in place by the kernel. Anything else stays in the prefix.
"""

from __future__ import annotations

import ast
import copy
import math
import operator
from pathlib import Path
from typing import Any

import torch
from torch import fx
from torch.fx.passes.shape_prop import ShapeProp

MIN_OPS = 2  # a single pointwise op gains nothing from its own kernel
MAX_INPUTS = 8  # tensors the kernel reads (prefix outputs and operator inputs)

_BINARY = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "div": "/"}
_UNARY = {
    "relu": "({a} < 0.f ? 0.f : {a})",  # keeps NaN, as torch.relu does
    "sigmoid": "(1.f / (1.f + expf(-{a})))",
    "tanh": "tanhf({a})",
    "neg": "(-{a})",
    "exp": "expf({a})",
    "abs": "fabsf({a})",
    "silu": "({a} / (1.f + expf(-{a})))",
    "sqrt": "sqrtf({a})",
}
# x ** e for a literal e: the products and root that PyTorch's CUDA pow special-cases, powf for the rest
_POWERS = {2.0: "({a} * {a})", 3.0: "({a} * {a} * {a})", 0.5: "sqrtf({a})"}
_GELU = {
    "none": "(0.5f * {a} * (1.f + erff({a} * 0.7071067811865476f)))",
    "tanh": "(0.5f * {a} * (1.f + tanhf(0.7978845608028654f * ({a} + 0.044715f * {a} * {a} * {a}))))",
}
_MODULES = {
    "ReLU": "relu",
    "GELU": "gelu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "SiLU": "silu",
    "LeakyReLU": "leaky_relu",
}


def _name(node: fx.Node, gm: fx.GraphModule) -> str | None:
    if node.op == "call_function":
        if node.target in (operator.add, operator.sub, operator.mul, operator.truediv, operator.neg):
            return str(node.target.__name__)
        return getattr(node.target, "__name__", "").lstrip("_").removesuffix("_") or None
    if node.op == "call_method":
        return str(node.target).removesuffix("_")
    if node.op == "call_module":
        return _MODULES.get(type(gm.get_submodule(str(node.target))).__name__)
    return None


def _literal(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return f"{float(value)!r}f"


def _arg(node: fx.Node, index: int, key: str, default: object = None) -> object:
    return node.kwargs.get(key, node.args[index] if len(node.args) > index else default)


def _expression(node: fx.Node, gm: fx.GraphModule, var: dict[fx.Node, str]) -> str | None:
    """The CUDA expression of one pointwise node over already-named operands, or None if unsupported."""
    name = _name(node, gm)
    if name is None:
        return None

    def operand(value: object) -> str | None:
        return var.get(value) if isinstance(value, fx.Node) else _literal(value)

    if node.op == "call_module":
        module = gm.get_submodule(str(node.target))
        a = operand(node.args[0]) if len(node.args) == 1 and not node.kwargs else None
        if a is None:
            return None
        if name == "gelu":
            template = _GELU.get(getattr(module, "approximate", "none"))
            return template.format(a=a) if template else None
        if name == "leaky_relu":
            slope = _literal(module.negative_slope)
            return f"({a} < 0.f ? {a} * {slope} : {a})" if slope else None
        return _UNARY[name].format(a=a)
    if not node.args:
        return None
    a = operand(node.args[0])
    if name in _BINARY:
        if (
            node.kwargs.get("alpha", 1) != 1
            or node.kwargs.get("rounding_mode") is not None
            or len(node.args) > 2
        ):
            return None
        b = operand(_arg(node, 1, "other"))
        return f"({a} {_BINARY[name]} {b})" if a and b else None
    if a is None or not isinstance(node.args[0], fx.Node):
        return None
    if name in _UNARY and set(node.kwargs) <= {"inplace"} and all(isinstance(x, bool) for x in node.args[1:]):
        return _UNARY[name].format(a=a)
    if name == "pow":
        exponent = _arg(node, 1, "exponent")
        literal = _literal(exponent)
        if literal is None or not isinstance(exponent, int | float) or node.kwargs.keys() - {"exponent"}:
            return None
        return _POWERS.get(float(exponent), "powf({a}, " + literal + ")").format(a=a)
    if name == "gelu":
        template = _GELU.get(str(_arg(node, 1, "approximate", "none")))
        return template.format(a=a) if template else None
    if name == "leaky_relu":
        slope = _literal(_arg(node, 1, "negative_slope", 0.01))
        return f"({a} < 0.f ? {a} * {slope} : {a})" if slope else None
    if name in ("clamp", "clamp_min", "clamp_max"):
        low = _arg(node, 1, "min") if name != "clamp_max" else None
        high = _arg(node, 2 if name == "clamp" else 1, "max") if name != "clamp_min" else None
        if (low is None and high is None) or any(v is not None and _literal(v) is None for v in (low, high)):
            return None
        expr = a
        if low is not None:
            expr = f"({expr} < {_literal(low)} ? {_literal(low)} : {expr})"
        if high is not None:
            expr = f"({expr} > {_literal(high)} ? {_literal(high)} : {expr})"
        return expr
    return None


class _AnyOperand(dict):
    """Names every node: asks whether an op is supported before the operands have names."""

    def get(self, key: object, default: object = None) -> str:
        return "t"


def _fusable(node: fx.Node, gm: fx.GraphModule) -> bool:
    return _expression(node, gm, _AnyOperand()) is not None


def _meta(node: object) -> tuple[tuple[int, ...], torch.dtype] | None:
    meta = getattr(node, "meta", {}).get("tensor_meta")
    return (tuple(meta.shape), meta.dtype) if meta is not None and hasattr(meta, "shape") else None


def _broadcasts(meta: tuple[tuple[int, ...], torch.dtype] | None, shape: tuple[int, ...]) -> bool:
    """A float32 tensor whose shape broadcasts to `shape` (right-aligned, each size equal or 1)."""
    if meta is None or meta[1] != torch.float32 or len(meta[0]) > len(shape):
        return False
    return all(a in (1, b) for a, b in zip(reversed(meta[0]), reversed(shape), strict=False))


def index_expression(operand: tuple[int, ...], shape: tuple[int, ...]) -> str:
    """The C expression of the element of a contiguous `operand` that broadcasts to output element `i`."""
    if tuple(operand) == tuple(shape):
        return "i"
    padded = (1,) * (len(shape) - len(operand)) + tuple(operand)
    out_strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    in_strides = [math.prod(padded[d + 1 :]) for d in range(len(shape))]
    terms = []
    for d, size in enumerate(padded):
        if size == 1:
            continue  # broadcast along d: the same element for every index there
        coord = "i" if out_strides[d] == 1 else f"(i / {out_strides[d]}LL)"
        coord = coord if d == 0 else f"({coord} % {shape[d]}LL)"
        terms.append(coord if in_strides[d] == 1 else f"{coord} * {in_strides[d]}LL")
    return " + ".join(terms) or "0"


def vector_lanes(operands: list[tuple[int, ...]], shape: tuple[int, ...]) -> list[str] | None:
    """How a kernel that computes four consecutive output elements per thread reads each operand, or None.

    "vector": four consecutive elements, one 16-byte load; "scalar": one element shared by the four. Operands of
    the output's shape are always "vector" (the launch checks that the element count divides by four). A
    broadcast operand qualifies when the output's last dimension divides by four, so the four elements share every
    other coordinate, and the operand spans that dimension whole (its index is then a multiple of four) or not at all.
    """
    if all(tuple(o) == tuple(shape) for o in operands):
        return ["vector"] * len(operands)
    if not shape or shape[-1] % 4:
        return None
    lanes = []
    for o in operands:
        last = o[-1] if o else 1
        if last not in (1, shape[-1]):
            return None
        lanes.append("vector" if last == shape[-1] else "scalar")
    return lanes


def _model_class(source: str) -> tuple[ast.Module, ast.ClassDef] | None:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            return tree, node
    return None


class _Super(ast.NodeTransformer):
    """super(Model, self) -> super(): the candidate must not name the reference class."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "super" and node.args:
            return ast.copy_location(ast.Call(func=node.func, args=[], keywords=[]), node)
        return node


def _names_model(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "Model" for n in ast.walk(tree))


def _module_parts(source: str) -> dict[str, str] | None:
    """The operator's file without class Model, Model's base and its __init__ (with super() unnamed)."""
    found = _model_class(source)
    if found is None:
        return None
    _tree, cls = found
    if len(cls.bases) != 1 or cls.decorator_list or cls.keywords:
        return None
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None:
        init_code = "def __init__(self, *args, **kwargs):\n    super().__init__()"
    else:
        init = _Super().visit(copy.deepcopy(init))
        if _names_model(init):
            return None
        init_code = ast.unparse(init)
    lines = source.splitlines()
    start = min([cls.lineno] + [d.lineno for d in cls.decorator_list]) - 1
    rest = "\n".join(lines[:start] + lines[cls.end_lineno or start :])
    if _names_model(ast.parse(rest)):
        return None
    return {"module_source": rest.rstrip(), "base": ast.unparse(cls.bases[0]), "init_code": init_code}


def describe(gm: fx.GraphModule, job: dict[str, Any]) -> dict[str, Any] | None:
    """The fusable pointwise tail of a shape-propagated graph, or None where there is none worth a kernel."""
    if job.get("kind") != "kernelbench" or not job.get("file"):
        return None
    output = next(n for n in gm.graph.nodes if n.op == "output")
    final = output.args[0]
    if not isinstance(final, fx.Node) or _meta(final) is None:
        return None
    shape, dtype = _meta(final)  # type: ignore[misc]
    if dtype != torch.float32:
        return None
    # The largest set of trailing pointwise nodes whose every user is in the set: their values never leave the kernel.
    fused: set[fx.Node] = set()
    for node in reversed(list(gm.graph.nodes)):
        users_inside = node is final or (bool(node.users) and all(u in fused for u in node.users))
        operands = [a for a in (*node.args, *node.kwargs.values()) if isinstance(a, fx.Node)]
        same = all(_broadcasts(_meta(a), shape) for a in operands) and _meta(node) == (shape, dtype)
        if users_inside and same and _fusable(node, gm):
            fused.add(node)
        elif node is final:
            return None
    order = [n for n in gm.graph.nodes if n in fused]
    inputs: list[fx.Node] = []
    for node in order:
        for arg in (*node.args, *node.kwargs.values()):
            if isinstance(arg, fx.Node) and arg not in fused and arg not in inputs:
                if not _broadcasts(_meta(arg), shape):
                    return None
                inputs.append(arg)
    if len(order) < MIN_OPS or not 1 <= len(inputs) <= MAX_INPUTS:
        return None
    input_shapes = [m[0] for n in inputs if (m := _meta(n)) is not None]  # every input has one (_broadcasts)
    var = {node: f"x{i}" for i, node in enumerate(inputs)}
    statements = []
    for i, node in enumerate(order):
        expr = _expression(node, gm, var)
        if expr is None:
            return None
        var[node] = f"v{i}"
        statements.append({"var": f"v{i}", "expr": expr, "op": _name(node, gm)})
    parts = _module_parts((Path(job["root"]) / job["file"]).read_text())
    if parts is None:
        return None
    prefix = copy.deepcopy(gm)
    names = {n.name: n for n in prefix.graph.nodes}
    prefix_output = next(n for n in prefix.graph.nodes if n.op == "output")
    prefix_output.args = (tuple(names[n.name] for n in inputs),)
    for node in reversed(order):
        prefix.graph.erase_node(names[node.name])
    prefix.graph.eliminate_dead_code()
    prefix.graph.lint()
    prefix.recompile()
    code = prefix.code.strip().replace("def forward(", "def prefix(", 1)
    return {
        "ops": [s["op"] for s in statements],
        "inputs": len(inputs),
        "statements": statements,
        "result": var[final],
        "shape": list(shape),
        "input_shapes": [list(m) for m in input_shapes],
        "index": [index_expression(m, shape) for m in input_shapes],
        "lanes": vector_lanes(input_shapes, shape),
        "prefix_code": code,
        **parts,
    }


def describe_job(job: dict[str, Any]) -> dict[str, Any] | None:
    """Trace the operator of `job` (CPU) and describe its epilogue: for tests and tools outside the tracer."""
    from kernelbot.harness.loader import Operator

    op = Operator({**job, "device": "cpu"})
    inputs = op.cases[0].make(0)
    gm = fx.symbolic_trace(op.reference)
    ShapeProp(gm).propagate(*inputs)
    return describe(gm, job)
