"""Parent side: a static scan of candidate source for the reward hacks of measurement.md.

The runtime guards (guards.py) see only what a candidate leaves behind; this scan sees intent: patching,
threads, side streams, tensor subclasses, introspection that could reach the harness's key or channel.
It runs before the sandbox is spawned, on the text alone, and never imports or executes the candidate.

NOTE: names are resolved through the file's own imports (`import torch.cuda as tc`, `from os import write`),
so an alias is no hiding place; strings built at run time are, which is why dynamic imports, `eval`/`exec`
and `getattr` on modules with a computed name are findings of their own.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

# rule -> dotted names (a use of the name or of anything under it is a finding) and why it is not allowed.
_FORBIDDEN: dict[str, tuple[tuple[str, ...], str]] = {
    "concurrency": (
        (
            "threading",
            "_thread",
            "multiprocessing",
            "torch.multiprocessing",
            "concurrent",
            "subprocess",
            "asyncio",
            "signal",
            "sched",
            "pty",
            "os.fork",
            "os.forkpty",
            "os.system",
            "os.popen",
            "os.spawnl",
            "os.spawnle",
            "os.spawnlp",
            "os.spawnlpe",
            "os.spawnv",
            "os.spawnve",
            "os.spawnvp",
            "os.spawnvpe",
            "os.posix_spawn",
            "os.posix_spawnp",
            "os.execl",
            "os.execle",
            "os.execlp",
            "os.execlpe",
            "os.execv",
            "os.execve",
            "os.execvp",
            "os.execvpe",
            "os.kill",
            "os.killpg",
            "os.setsid",
            "torch.jit.fork",
            "torch.jit.wait",
            "torch.jit._fork",
            "torch.futures",
        ),
        "work outside the calling thread escapes the timer and the output check",
    ),
    "stream": (
        (
            "torch.cuda.Stream",
            "torch.cuda.stream",
            "torch.cuda.set_stream",
            "torch.cuda.ExternalStream",
            "torch.cuda._set_stream_by_id",
            "torch._C._cuda_setStream",
            "torch.cuda.streams",
            "torch.Stream",
            "torch.stream",
            "torch.cuda.StreamContext",
            "torch.cuda.default_stream",
            "cupy.cuda.Stream",
            "cupy.cuda.ExternalStream",
            "cupy.cuda.stream",
            "cupy.cuda.Stream.null",
        ),
        "work on a stream other than the current one can escape the timing events",
    ),
    "tensor-subclass": (
        (
            "torch.Tensor._make_subclass",
            "torch.Tensor._make_wrapper_subclass",
            "torch.Tensor.as_subclass",
            "torch.overrides",
            "torch.utils._python_dispatch",
            "torch._C._disabled_torch_function_impl",
            "torch.utils._pytree.register_pytree_node",
        ),
        "a tensor subclass or dispatch hook can defer or fake the computation the harness checks",
    ),
    "introspection": (
        (
            "gc",
            "inspect",
            "ctypes",
            "cffi",
            "mmap",
            "sys._getframe",
            "sys._current_frames",
            "sys.argv",
            "sys.modules",
            "sys.settrace",
            "sys.setprofile",
            "sys.stdin",
            "sys.addaudithook",
            "sys.meta_path",
            "sys.path_hooks",
            "os.write",
            "os.read",
            "os.dup",
            "os.dup2",
            "os.fdopen",
            "os.pipe",
            "traceback.walk_stack",
            "traceback.walk_tb",
            "__main__",
        ),
        "introspection or raw file descriptors could reach the harness's key, channel or code",
    ),
    "network": (
        (
            "socket",
            "ssl",
            "urllib",
            "urllib3",
            "http",
            "requests",
            "httpx",
            "aiohttp",
            "ftplib",
            "smtplib",
            "telnetlib",
            "xmlrpc",
            "websocket",
            "websockets",
        ),
        "a candidate has no business on the network",
    ),
    "harness-access": (("kernelbot",), "candidate code must not read or import the harness that judges it"),
    "dynamic-code": (
        ("eval", "exec", "compile", "__import__", "importlib", "runpy", "builtins", "__builtins__"),
        "code built at run time hides from this scan",
    ),
}

# Dunder and frame attributes that walk from an object to code, globals or frames (and so to the key).
_INTROSPECTIVE_ATTRS = frozenset(
    {
        "__globals__",
        "__closure__",
        "__code__",
        "__subclasses__",
        "__builtins__",
        "f_back",
        "f_locals",
        "f_globals",
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "ag_frame",
    }
)
_DISPATCH_HOOKS = frozenset({"__torch_function__", "__torch_dispatch__"})
_SUBCLASS_ATTRS = frozenset({"as_subclass", "_make_subclass", "_make_wrapper_subclass"})
# Wrapping the current stream (torch's) for another library keeps the work where the timer looks.
_STREAM_WRAPPERS = ("cupy.cuda.ExternalStream", "torch.cuda.ExternalStream")
_TENSOR_BASES = (
    "torch.Tensor",
    "torch._C.TensorBase",
    "torch._C._TensorBase",
    "torch.nn.Parameter",
    "torch.nn.parameter.Parameter",
)
# Global switches an honest candidate may flip: they change algorithm choice, not what is computed.
_ALLOWED_SETTINGS = ("torch.backends.cudnn.benchmark", "torch._dynamo.config", "torch._inductor.config")
_PRECISION_ATTRS = frozenset(
    {
        "allow_tf32",
        "fp32_precision",
        "allow_fp16_reduced_precision_reduction",
        "allow_bf16_reduced_precision_reduction",
        "allow_fp16_accumulation",
    }
)
_TF32_ATTRS = frozenset({"allow_tf32", "fp32_precision"})
# torch.backends.cudnn.flags(enabled, benchmark, benchmark_limit, deterministic, allow_tf32=True, ...)
_CUDNN_FLAGS_TF32_POSITION = 4
# Native source (load_inline, RawKernel strings) is opaque to the AST; these spellings are the usual suspects.
_NATIVE_PATTERNS: tuple[tuple[str, str, str], ...] = (
    (
        r"cudaStreamCreate|cuStreamCreate|getStreamFromPool|setCurrentCUDAStream",
        "stream",
        "native code creates or switches CUDA streams",
    ),
    (
        r"std::thread|std::async|pthread_create|\bfork\s*\(|\bpopen\s*\(|\bsystem\s*\(",
        "concurrency",
        "native code starts threads or processes",
    ),
)
_HARNESS_NAME = re.compile(r"\bkernelbot")


@dataclass(frozen=True)
class Finding:
    line: int  # 1-based line of the source where the pattern appears
    rule: str  # category: monkeypatch, concurrency, stream, tensor-subclass, introspection, network, ...
    message: str  # one line: what was found and why it is not allowed


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


class _Scanner(ast.NodeVisitor):
    def __init__(self, *, allow_tf32: bool, require_kernel: bool) -> None:
        self.allow_tf32, self.require_kernel = allow_tf32, require_kernel
        self.class_bases: list[list[str]] = []  # the bases of each class being visited, innermost last
        self.defined_classes: set[str] = set()  # classes this file has defined so far
        self.aliases: dict[str, str] = {}  # local name -> dotted name it was imported as
        self.findings: list[Finding] = []
        self.docstrings: set[int] = set()  # id() of docstring constants, which name things without using them
        self.exempt: set[int] = set()  # id() of nodes already judged harmless (a wrapped current stream)

    # -- resolution ----------------------------------------------------------------------------
    def collect(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        root = a.name.split(".")[0]
                        self.aliases[root] = root
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name != "*":
                        self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            if (
                isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and node.body
            ):
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    self.docstrings.add(id(first.value))

    def dotted(self, node: ast.expr) -> str | None:
        """The dotted name an expression stands for, through imports and `getattr(x, "const")`."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
        ):
            base, name = self.dotted(node.args[0]), node.args[1]
            if base and isinstance(name, ast.Constant) and isinstance(name.value, str):
                return f"{base}.{name.value}"
        return None

    def is_module_path(self, node: ast.expr) -> bool:
        """Whether the expression is rooted in an imported module (not a local object such as `self`)."""
        root: ast.expr = node
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and (
            root.id in self.aliases or root.id in ("builtins", "__builtins__")
        )

    def add(self, node: ast.AST, rule: str, message: str) -> None:
        self.findings.append(Finding(getattr(node, "lineno", 0), rule, message))

    def check_name(self, node: ast.AST, name: str) -> None:
        for rule, (prefixes, why) in _FORBIDDEN.items():
            for prefix in prefixes:
                if _under(name, prefix):
                    self.add(node, rule, f"uses {name}: {why}")
                    return

    # -- imports -------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.check_name(node, a.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            return  # relative imports of the candidate's own package
        module = node.module or ""
        for a in node.names:
            self.check_name(node, module if a.name == "*" else f"{module}.{a.name}")
            if self.require_kernel and a.name == "Model":
                self.add(
                    node,
                    "reference-fallback",
                    f"imports the reference Model from {module}: a custom kernel is required",
                )

    # -- uses ----------------------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if (
            node.id in ("eval", "exec", "compile", "__import__", "__builtins__")
            and node.id not in self.aliases
        ):
            self.add(node, "dynamic-code", f"uses {node.id}: code built at run time hides from this scan")
        elif node.id in _DISPATCH_HOOKS:
            self.add(
                node, "tensor-subclass", f"uses {node.id}: a dispatch hook can defer or fake the computation"
            )
        elif self.require_kernel and node.id == "Model":
            self.add(node, "reference-fallback", "uses the reference Model: a custom kernel is required")
        elif node.id in self.aliases and isinstance(node.ctx, ast.Load):
            self.check_name(node, self.aliases[node.id])

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if id(node) in self.exempt:
            return
        if node.attr in _INTROSPECTIVE_ATTRS:
            self.add(
                node,
                "introspection",
                f"reads .{node.attr}: walks to code, globals or frames the harness keeps private",
            )
        elif node.attr in _DISPATCH_HOOKS | _SUBCLASS_ATTRS:
            self.add(
                node,
                "tensor-subclass",
                f"uses {node.attr}: a tensor subclass or dispatch hook can defer or fake the computation",
            )
        name = self.dotted(node)
        if name is not None and self.is_module_path(node):
            self.check_name(node, name)
        else:
            self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = self.dotted(node.func) or ""
        if name in _STREAM_WRAPPERS and any(
            isinstance(sub, ast.Attribute) and sub.attr in ("current_stream", "get_current_stream")
            for arg in node.args
            for sub in ast.walk(arg)
        ):
            self.exempt.add(id(node.func))
        if name == "getattr" and len(node.args) >= 2 and self.is_module_path(node.args[0]):
            resolved = self.dotted(node)
            if resolved:
                self.check_name(node, resolved)
        if name in ("setattr", "delattr") and node.args:
            target = node.args[0]
            attr = node.args[1] if len(node.args) > 1 else None
            if self.is_module_path(target):
                const = (
                    attr.value
                    if isinstance(attr, ast.Constant) and isinstance(attr.value, str)
                    else "<computed>"
                )
                self.patched(node, f"{self.dotted(target)}.{const}")
        elif (
            name == "getattr"
            and len(node.args) >= 2
            and self.is_module_path(node.args[0])
            and not isinstance(node.args[1], ast.Constant)
        ):
            self.add(
                node,
                "dynamic-code",
                f"getattr on {self.dotted(node.args[0])} with a computed name hides what it reaches",
            )
        elif name in ("torch.set_float32_matmul_precision", "torch.backends.cudnn.flags"):
            self.precision_call(node, name)
        if (
            self.require_kernel
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "forward"
            and isinstance(node.func.value, ast.Call)
            and isinstance(node.func.value.func, ast.Name)
            and node.func.value.func.id == "super"
            and not self.in_own_subclass()
        ):
            self.add(
                node,
                "reference-fallback",
                "calls super().forward: the reference computes the result, not a custom kernel",
            )
        first = node.args[0] if node.args else None
        if (
            _under(name, "torch.library")
            and isinstance(first, ast.Constant)
            and str(first.value).startswith("aten")
        ):
            self.add(
                node,
                "monkeypatch",
                f"calls {name}({first.value!r}): kernels registered for aten replace the reference's operators too",
            )
        self.generic_visit(node)

    def in_own_subclass(self) -> bool:
        """Inside a class whose bases are all classes this file defined before (a wrapper stacked on the
        candidate): super() reaches the candidate's own code, which is scanned too, not the reference."""
        bases = self.class_bases[-1] if self.class_bases else []
        return bool(bases) and all(b in self.defined_classes for b in bases)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.class_bases.append([self.dotted(b) or "" for b in node.bases])
        for base in node.bases:
            name = self.dotted(base) or ""
            if any(_under(name, b) for b in _TENSOR_BASES):
                self.add(
                    node,
                    "tensor-subclass",
                    f"class {node.name} subclasses {name}: the output must be a plain tensor computed now",
                )
            elif self.require_kernel and (name == "Model" or name.endswith(".Model")):
                self.add(
                    node,
                    "reference-fallback",
                    f"class {node.name} inherits the reference Model: a custom kernel is required",
                )
        self.generic_visit(node)
        self.class_bases.pop()
        self.defined_classes.add(node.name)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in _DISPATCH_HOOKS:
            self.add(
                node,
                "tensor-subclass",
                f"defines {node.name}: a dispatch hook can defer or fake the computation",
            )
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str) or id(node) in self.docstrings:
            return
        if _HARNESS_NAME.search(node.value):
            self.add(
                node,
                "harness-access",
                "names kernelbot in a string: candidate code must not reach the harness",
            )
        for pattern, rule, why in _NATIVE_PATTERNS:
            if re.search(pattern, node.value):
                self.add(node, rule, f"{why} (in a source string)")

    # -- assignments ---------------------------------------------------------------------------
    def assigned(self, node: ast.AST, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for t in target.elts:
                self.assigned(node, t, None)
            return
        if isinstance(target, ast.Attribute) and target.attr == "__class__":
            self.add(
                node,
                "tensor-subclass",
                "assigns __class__: an object's type must not change under the harness",
            )
            return
        if (
            isinstance(target, ast.Subscript)
            and isinstance(target.value, ast.Attribute)
            and target.value.attr == "__dict__"
            and self.is_module_path(target.value)
        ):
            self.patched(node, f"{self.dotted(target.value)}[...]")
            return
        if isinstance(target, ast.Attribute) and self.is_module_path(target):
            name = self.dotted(target) or target.attr
            if target.attr in _PRECISION_ATTRS and _under(name, "torch.backends"):
                self.precision_set(node, name, target.attr, value)
            elif not any(_under(name, ok) for ok in _ALLOWED_SETTINGS):
                self.patched(node, name)

    def patched(self, node: ast.AST, name: str) -> None:
        self.add(
            node,
            "monkeypatch",
            f"assigns {name}: replacing library or harness attributes can fake timing or correctness",
        )

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.assigned(node, target, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.assigned(node, node.target, None)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.assigned(node, node.target, node.value)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self.assigned(node, target, None)
        self.generic_visit(node)

    # -- precision -----------------------------------------------------------------------------
    def precision_set(self, node: ast.AST, name: str, attr: str, value: ast.expr | None) -> None:
        const = value.value if isinstance(value, ast.Constant) else object()
        if const is False or const in ("ieee", "highest"):
            return  # full precision is what the reference runs at
        if self.allow_tf32 and attr in _TF32_ATTRS and (const is True or const == "tf32"):
            return
        self.add(node, "precision-flag", f"sets {name}: lower precision than the operator's policy allows")

    def precision_call(self, node: ast.Call, name: str) -> None:
        if name == "torch.backends.cudnn.flags":
            # allow_tf32 defaults to True there: leaving it out (or passing it positionally, 5th) turns TF32 on.
            given = next((kw.value for kw in node.keywords if kw.arg == "allow_tf32"), None)
            if given is None and len(node.args) > _CUDNN_FLAGS_TF32_POSITION:
                given = node.args[_CUDNN_FLAGS_TF32_POSITION]
            off = isinstance(given, ast.Constant) and given.value is False
            if not off and not self.allow_tf32:
                self.add(
                    node,
                    "precision-flag",
                    f"calls {name}() without allow_tf32=False (its default turns TF32 on): "
                    "TF32 is not allowed for this operator",
                )
            return
        arg = node.args[0] if node.args else None
        const = arg.value if isinstance(arg, ast.Constant) else None
        if const == "highest" or (self.allow_tf32 and const == "high"):
            return
        self.add(
            node,
            "precision-flag",
            f"calls {name}({const!r}): lower precision than the operator's policy allows",
        )


def _lines(findings: list[Finding]) -> Iterator[Finding]:
    seen: set[tuple[int, str]] = set()
    for f in sorted(findings, key=lambda f: (f.line, f.rule)):
        if (f.line, f.rule) not in seen:
            seen.add((f.line, f.rule))
            yield f


def scan(source: str, *, allow_tf32: bool = False, require_kernel: bool = False) -> list[Finding]:
    """Findings in candidate source, one per (line, rule), in line order; empty means nothing suspicious.

    Source that does not parse yields no AST findings: the loader reports it as build_error with
    Python's own message, and code that cannot be imported cannot cheat.
    """
    findings: list[Finding] = []
    for number, text in enumerate(source.splitlines(), start=1):
        if "/proc/" in text:  # also in comments or built strings: the AST cannot see every use
            findings.append(
                Finding(
                    number,
                    "introspection",
                    "mentions /proc/: process introspection could reach the harness's channel",
                )
            )
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return list(_lines(findings))
    scanner = _Scanner(allow_tf32=allow_tf32, require_kernel=require_kernel)
    scanner.collect(tree)
    scanner.visit(tree)
    return list(_lines(findings + scanner.findings))
