"""Parent side: a static scan of candidate source for the reward hacks of measurement.md.

The runtime guards (guards.py) see only what a candidate leaves behind; this scan sees intent: patching,
threads, side streams, tensor subclasses, introspection that could reach the harness's key or channel.
It runs before the sandbox is spawned, on the text alone, and never imports or executes the candidate.

NOTE: names are resolved through the file's own imports (`import torch.cuda as tc`, `from os import write`,
`from os import *`), so an alias is no hiding place; strings built at run time are, which is why dynamic
imports, `eval`/`exec`, `getattr` or a namespace lookup (`vars(m)[k]`, `m.__dict__[k]`) on a module with a
computed name, and a guarded module passed around as a value are findings of their own. Strings are folded
(concatenation, joins, formatting, chr(), decoding of literals) before they are judged, so `"tb_" + "frame"`
reads as "tb_frame"; text built from what the source does not hold (input, arithmetic on data) stays unknown.
This scan is a first filter only: the runtime audit hooks and the OS sandbox are the defence it cannot be.

Why one module of ~850 lines: it is one AST visitor whose checks share its name resolution (import aliases,
folded strings, the classes seen so far); split across files, a check would reach into another's state. What
it looks for is data in forbidden.py.
"""

from __future__ import annotations

import ast
import re
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass

from kernelbot.harness.forbidden import (
    ALLOWED_SETTINGS,
    CUDNN_FLAGS_TF32_POSITION,
    DISPATCH_HOOKS,
    ENVIRON,
    ENVIRON_WRITERS,
    FD_OPENERS,
    FOLD_LIMIT,
    FORBIDDEN,
    FORBIDDEN_STRINGS,
    GUARDED_NAMESPACES,
    HARNESS_NAME,
    IMPORT_ATTRS,
    INTROSPECTIVE_ATTRS,
    NAME_LOOKUPS,
    NATIVE_PATTERNS,
    PRECISION_ATTRS,
    PRIVATE_TWINS,
    PROCESS_PATHS,
    REEXPORTED,
    STREAM_WRAPPERS,
    SUBCLASS_ATTRS,
    SUSPECT_PREFIX,
    SUSPECT_SUFFIX,
    TENSOR_BASES,
    TF32_ATTRS,
)


@dataclass(frozen=True)
class Finding:
    line: int  # 1-based line of the source where the pattern appears
    rule: str  # category: monkeypatch, concurrency, stream, tensor-subclass, introspection, network, ...
    message: str  # one line: what was found and why it is not allowed


def _reexported(parts: list[str], start: int) -> str | None:
    """The dotted name from parts[start] on, where that part is a module another one holds as a global
    (`torch.os`), also under a private alias (`tempfile._os`); else None."""
    for head in (parts[start], parts[start].lstrip("_")):
        if head in REEXPORTED:
            return ".".join([head, *parts[start + 1 :]])
    return None


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
        self.called: set[int] = set()  # id() of the expressions called (a Call's func)
        self.type_uses: set[int] = set()  # id() of the nodes in annotations and isinstance's types
        self.modules: set[str] = set()  # local names bound by `import x` / `import x as y`: modules for sure
        self.star_modules: list[str] = []  # modules imported with `from m import *`
        self.bound: set[str] = set()  # every name the file binds itself (which shadows a star import)
        self.constants: dict[str, ast.expr] = {}  # names bound exactly once, by `name = <expr>`
        self.bases: set[int] = set()  # id() of expressions only read from or tested (`m.x`, `m is None`)
        self.folded: dict[int, str | None] = {}
        self.folding: set[str] = set()  # names being folded now (a cycle folds to unknown)
        self.too_deep = False  # some text was built through more steps than folding follows

    # -- resolution ----------------------------------------------------------------------------
    def collect(self, tree: ast.Module) -> None:
        stores: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                        self.modules.add(a.asname)
                    else:
                        root = a.name.split(".")[0]
                        self.aliases[root] = root
                        self.modules.add(root)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name != "*":
                        self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    else:
                        self.star_modules.append(node.module)
            if isinstance(node, ast.Attribute):
                self.bases.add(id(node.value))
            elif isinstance(node, ast.Compare):  # `cupy is not None`: tested, not handed on
                self.bases.update(id(e) for e in (node.left, *node.comparators))
            elif isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
                self.bases.add(id(node.test))
            elif isinstance(node, ast.BoolOp):
                self.bases.update(id(e) for e in node.values)
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                self.bases.add(id(node.operand))
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                stores[node.id] = stores.get(node.id, 0) + 1
            elif isinstance(node, ast.arg):
                stores[node.arg] = stores.get(node.arg, 0) + 1
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                stores[node.name] = stores.get(node.name, 0) + 1
            elif isinstance(node, ast.alias):
                name = (node.asname or node.name).split(".")[0]
                stores[name] = stores.get(name, 0) + 1
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                self.constants[node.targets[0].id] = node.value
            if (
                isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and node.body
            ):
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    self.docstrings.add(id(first.value))
        self.bound = set(stores)
        self.constants = {k: v for k, v in self.constants.items() if stores.get(k) == 1}
        # A name bound once to a module reached by attributes of an imported one (`st = torch.storage`) stands
        # for that module, as an import alias does: a computed getattr on it is one on the module (attacker
        # round 49 found threading through torch.storage so). Modules only, those this process has imported
        # (the harness imports torch before it scans): `dt = torch.float16; getattr(dt, name)` stays honest.
        for name, value in self.constants.items():
            if isinstance(value, ast.Attribute) and name not in self.aliases and self.is_module_path(value):
                dotted = self.dotted(value)
                if dotted is not None and isinstance(sys.modules.get(dotted), types.ModuleType):
                    self.aliases[name] = dotted

    # -- constant folding ----------------------------------------------------------------------
    def fold(self, node: ast.expr | None) -> str | None:
        """The text an expression always evaluates to, where that is knowable from the source alone: constants,
        names bound once to one, and concatenation, joins, formatting, slicing, chr(), case and decoding of
        those. None: not knowable (or too long to bother)."""
        if node is None:
            return None
        key = id(node)
        if key not in self.folded:
            self.folded[key] = None  # a cycle through this node folds to unknown
            try:
                text = self._fold(node)
            except (ValueError, TypeError, IndexError, KeyError, OverflowError, UnicodeError):
                text = None
            except RecursionError:  # a chain of names too long to follow: refused, not passed unread
                text, self.too_deep = None, True
            self.folded[key] = text if text is None or len(text) <= FOLD_LIMIT else None
        return self.folded[key]

    def _fold(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.Name):
            value = self.constants.get(node.id)
            if value is None or node.id in self.folding:
                return None
            self.folding.add(node.id)
            try:
                return self.fold(value)
            finally:
                self.folding.discard(node.id)
        if isinstance(node, ast.BinOp):
            left = self.fold(node.left)
            if left is None:
                return None
            if isinstance(node.op, ast.Add):
                right = self.fold(node.right)
                return None if right is None else left + right
            if isinstance(node.op, ast.Mult):
                times = self.fold_int(node.right)
                return left * times if times is not None and len(left) * times <= FOLD_LIMIT else None
            if isinstance(node.op, ast.Mod) and not re.search(r"%[^a-z%]*[1-9*]", left):
                items = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
                args = [self.fold(e) for e in items]
                return None if None in args else left % tuple(args)
            return None
        if isinstance(node, ast.JoinedStr):
            parts = [self.fold_formatted(v) for v in node.values]
            return None if None in parts else "".join(p for p in parts if p is not None)
        if isinstance(node, ast.Subscript):
            base = self.fold(node.value)
            if base is None:
                return None
            if isinstance(node.slice, ast.Slice):
                bounds = [
                    self.fold_int(b) if b is not None else None for b in (node.slice.lower, node.slice.upper)
                ]
                step = self.fold_int(node.slice.step) if node.slice.step is not None else None
                return base[bounds[0] : bounds[1] : step]
            index = self.fold_int(node.slice)
            return None if index is None else base[index]
        if isinstance(node, ast.Call):
            return self.fold_call(node)
        return None

    def fold_formatted(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.FormattedValue):
            if node.format_spec is not None:
                return None
            text = self.fold(node.value)
            return repr(text) if text is not None and node.conversion == ord("r") else text
        return self.fold(node)

    def fold_int(self, node: ast.expr | None) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = self.fold_int(node.operand)
            return None if value is None else -value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult):
            left, right = self.fold_int(node.left), self.fold_int(node.right)
            if left is None or right is None:
                return None
            value = left + right if isinstance(node.op, ast.Add) else left - right
            value = left * right if isinstance(node.op, ast.Mult) else value
            return value if abs(value) <= FOLD_LIMIT else None
        return None

    def fold_items(self, node: ast.expr) -> list[str] | None:
        """The strings an iterable literal yields: a list/tuple of texts, a text's characters, map(chr, ints)."""
        if isinstance(node, ast.List | ast.Tuple):
            texts = [self.fold(e) for e in node.elts]
            if None in texts:
                return self.chars(node.elts)
            return [t for t in texts if t is not None]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 1:
            if node.func.id in ("reversed", "list", "tuple") and len(node.args) == 1:
                items = self.fold_items(node.args[0])
                return items[::-1] if items is not None and node.func.id == "reversed" else items
            if node.func.id == "map" and len(node.args) == 2:
                func, codes = node.args
                if (
                    isinstance(func, ast.Name)
                    and func.id == "chr"
                    and isinstance(codes, ast.List | ast.Tuple)
                ):
                    return self.chars(codes.elts)
                if isinstance(func, ast.Name) and func.id == "str":
                    return self.fold_items(node.args[1])
        text = self.fold(node)
        return None if text is None else list(text)

    def chars(self, codes: list[ast.expr]) -> list[str] | None:
        """[chr(c) for c in codes] where every code folds to an int."""
        ints = [self.fold_int(e) for e in codes]
        return [chr(c) for c in ints if c is not None] if None not in ints else None

    def fold_bytes(self, node: ast.expr) -> bytes | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes):
            return node.value
        if isinstance(node, ast.Call) and len(node.args) == 1:
            name = self.dotted(node.func) or ""
            if name in ("bytes", "bytearray") and isinstance(node.args[0], ast.List | ast.Tuple):
                codes = [self.fold_int(e) for e in node.args[0].elts]
                return None if None in codes else bytes(c for c in codes if c is not None)
            if name in ("bytes.fromhex", "bytearray.fromhex"):
                text = self.fold(node.args[0])
                return None if text is None else bytes.fromhex(text)
            if name in ("base64.b64decode", "base64.b32decode", "base64.b16decode", "base64.b85decode"):
                raw = self.fold_bytes(node.args[0])
                text = self.fold(node.args[0])
                data = raw if raw is not None else (text.encode() if text is not None else None)
                if data is None:
                    return None
                import base64  # the standard library's decoder, on the candidate's literal text only

                return bytes(getattr(base64, name.split(".")[1])(data))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "encode":
            text = self.fold(node.func.value)
            return None if text is None else text.encode()
        return None

    def fold_call(self, node: ast.Call) -> str | None:
        func, args = node.func, node.args
        if node.keywords and not (isinstance(func, ast.Attribute) and func.attr == "format"):
            return None
        if isinstance(func, ast.Name) and len(args) == 1:
            if func.id == "chr":
                code = self.fold_int(args[0])
                return None if code is None else chr(code)
            if func.id == "str":
                return self.fold(args[0])
        name = self.dotted(func) or ""
        if name == "codecs.decode" and len(args) == 2 and self.fold(args[1]) in ("rot13", "rot_13"):
            import codecs  # rot13 is a text-to-text codec: no candidate code runs

            text = self.fold(args[0])
            return None if text is None else str(codecs.decode(text, "rot13"))
        if not isinstance(func, ast.Attribute):
            return None
        if func.attr == "decode":
            data = self.fold_bytes(func.value)
            return None if data is None else data.decode()
        base = self.fold(func.value)
        if base is None:
            return None
        if func.attr == "join" and len(args) == 1:
            items = self.fold_items(args[0])
            return None if items is None else base.join(items)
        if func.attr == "format":
            if re.search(r"\{[^}]*[:!][^}]*[1-9*]", base):
                return None  # a width could make the text as long as it likes
            values = [self.fold(a) for a in args]
            named = {kw.arg: self.fold(kw.value) for kw in node.keywords if kw.arg}
            if None in values or None in named.values() or len(named) != len(node.keywords):
                return None
            return base.format(*values, **named)
        texts = [self.fold(a) for a in args]
        if None in texts:
            return None
        methods = (
            "lower",
            "upper",
            "strip",
            "lstrip",
            "rstrip",
            "title",
            "casefold",
            "swapcase",
            "capitalize",
        )
        if func.attr in methods or func.attr in ("removeprefix", "removesuffix"):
            return str(getattr(base, func.attr)(*texts))
        if func.attr == "replace" and len(texts) == 2:
            old, new = texts[0] or "", texts[1] or ""
            if (base.count(old) + 1) * len(new) + len(base) > FOLD_LIMIT:
                return None
            return base.replace(old, new)
        return None

    def edge(self, node: ast.expr, last: bool) -> str:
        """The known text at the start (or end) of a name built at run time: "tb_" in `"tb_" + x`."""
        text = self.fold(node)
        if text is not None:
            return text
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.edge(node.right if last else node.left, last)
        if isinstance(node, ast.JoinedStr) and node.values:
            return self.edge(node.values[-1] if last else node.values[0], last)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            base = self.fold(node.func.value) or ""
            return base.rsplit("}", 1)[-1] if last else base.split("{", 1)[0]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            base = self.fold(node.left) or ""
            return re.split(r"%[^a-z%]*[a-z]", base)[-1 if last else 0]
        return ""

    def dotted(self, node: ast.expr) -> str | None:
        """The dotted name an expression stands for, through imports and `getattr(x, "const")`."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        spelt = self.getattr_const(node)
        if spelt is not None:
            base = self.dotted(spelt[0])
            return f"{base}.{spelt[1]}" if base else None
        return None

    def getattr_const(self, node: ast.expr) -> tuple[ast.expr, str] | None:
        """`getattr(x, "const")` (the name folded) as (x, name): the attribute path it spells."""
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
        ):
            name = self.fold(node.args[1])
            if name is not None:
                return node.args[0], name
        return None

    def is_module_path(self, node: ast.expr) -> bool:
        """Whether the expression is rooted in an imported module (not a local object such as `self`), through
        attributes and `getattr(x, "const")` (attacker round 48 set `getattr(torch, "cu" + "da")`'s
        is_available so)."""
        root: ast.expr = node
        while True:
            spelt = self.getattr_const(root)
            if isinstance(root, ast.Attribute):
                root = root.value
            elif spelt is not None:
                root = spelt[0]
            else:
                break
        return isinstance(root, ast.Name) and (
            root.id in self.aliases or root.id in ("builtins", "__builtins__")
        )

    def add(self, node: ast.AST, rule: str, message: str) -> None:
        self.findings.append(Finding(getattr(node, "lineno", 0), rule, message))

    def check_name(self, node: ast.AST, name: str) -> bool:
        """A finding when the name (or a module re-exported inside it: `torch.os.system`) is forbidden."""
        parts = name.split(".")
        for start in range(len(parts)):
            tail = _reexported(parts, start) if start else name
            if tail is None:
                continue
            for rule, (prefixes, why) in FORBIDDEN.items():
                for prefix in prefixes:
                    if _under(tail, prefix):
                        self.add(node, rule, f"uses {name}: {why}")
                        return True
        return False

    def check_string(self, node: ast.AST, text: str) -> None:
        """A finding when text (a literal, or one folded from pieces) spells a name or path this scan refuses."""
        rule = FORBIDDEN_STRINGS.get(text)
        if rule is not None:
            self.add(
                node,
                rule,
                f"spells {text!r} as a string: a name looked up as text reaches what this scan refuses as code",
            )
        if any(path in text for path in PROCESS_PATHS):
            self.add(
                node,
                "introspection",
                "names /proc/ or /dev/fd in a string: process introspection could reach the harness's channel",
            )
        if HARNESS_NAME.search(text):
            self.add(
                node,
                "harness-access",
                "names kernelbot in a string: candidate code must not reach the harness",
            )
        for pattern, native_rule, why in NATIVE_PATTERNS:
            if re.search(pattern, text):
                self.add(node, native_rule, f"{why} (in a source string)")

    def check_strings(self, tree: ast.Module) -> None:
        """Strings assembled from pieces (concatenation, join, format, f-strings of constants), folded first."""
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp | ast.JoinedStr | ast.Call | ast.Subscript):
                text = self.fold(node)
                if text is not None:
                    self.check_string(node, text)

    def computed_name(self, node: ast.AST, target: ast.expr | None, name: ast.expr, how: str) -> None:
        """An attribute reached by a name given as an expression (getattr, setattr, a namespace lookup).

        The name is folded first: known text is judged as the attribute it spells (on a module, through
        check_name; anywhere, as a string). Text not knowable from the source is refused on an imported module
        (`getattr(os, x)`, `vars(torch)[x]`: every module a candidate imports may hold forbidden names,
        torch among them with torch.multiprocessing and torch.overrides, and a literal or a dict of the
        objects it means does the same honestly). On other objects (`getattr(self, f"conv{i}")`, a common
        honest pattern) only text that begins or ends like a frame or dunder attribute is refused: the object
        could be anything, and the runtime layer (audit hooks, the sandbox) is the defence for the rest.
        """
        text = self.fold(name)
        on_module = target is not None and self.is_module_path(target)
        base = self.dotted(target) if target is not None and on_module else None
        if text is not None:
            if base:
                self.check_name(node, f"{base}.{text}")
            return  # the string itself is judged where it stands (check_strings, visit_Constant)
        if on_module:
            self.add(node, "dynamic-code", f"{how} on {base} with a computed name hides what it reaches")
            return
        start, end = self.edge(name, last=False), self.edge(name, last=True)
        if SUSPECT_PREFIX.search(start) or SUSPECT_SUFFIX.search(end):
            self.add(
                node,
                "introspection",
                f"{how} with a name built from {start or end!r}: frame and dunder attributes are refused "
                "however they are spelt",
            )

    def module_value(self, node: ast.expr) -> str | None:
        """The module an expression names, where it is a module this scan guards (see GUARDED_NAMESPACES)."""
        if isinstance(node, ast.Name) and node.id in self.modules:
            return self.aliases[node.id]
        name = self.dotted(node)
        if name is None or not self.is_module_path(node):
            return None
        if name in GUARDED_NAMESPACES:
            return name
        parts = name.split(".")  # `shutil.os`, `tempfile._os`: os, held by another module
        tails = (_reexported(parts, start) for start in range(1, len(parts)))
        return next((t for t in tails if t in GUARDED_NAMESPACES), None)

    def escaped(self, node: ast.expr) -> None:
        """A guarded module used as a value (not the object of an attribute access): `m = os`, `f(os)`."""
        if id(node) in self.bases or id(node) in self.exempt:
            return
        module = self.module_value(node)
        if module is not None:
            self.add(
                node,
                "dynamic-code",
                f"passes the module {module} around as a value: what is later reached through it hides "
                "from this scan",
            )

    # -- imports -------------------------------------------------------------------------------
    def imported(self, node: ast.AST, name: str) -> None:
        root, _, rest = name.partition(".")
        twin = PRIVATE_TWINS.get(root)
        if twin is not None:
            self.check_name(node, f"{twin}.{rest}" if rest else twin)
        elif root.startswith("_") and root != "__future__":
            self.add(
                node,
                "introspection",
                f"imports {root}: a private C module stands in for public ones this scan refuses",
            )
        else:
            self.check_name(node, name)

    def star_imported(self, node: ast.ImportFrom, module: str) -> None:
        """`from os import *`: refused where the module holds a forbidden name, which would arrive bare."""
        self.imported(node, module)
        for rule, (prefixes, _) in FORBIDDEN.items():
            member = next((p for p in prefixes if p.startswith(module + ".")), None)
            if member is not None:
                self.add(
                    node,
                    rule,
                    f"imports * from {module}: {member} and the rest arrive as bare names this scan cannot "
                    "tell from the file's own",
                )
                return

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.imported(node, a.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            return  # relative imports of the candidate's own package
        module = node.module or ""
        for a in node.names:
            if a.name == "*":
                self.star_imported(node, module)
            else:
                self.imported(node, f"{module}.{a.name}")
            if self.require_kernel and a.name == "Model":
                self.add(
                    node,
                    "reference-fallback",
                    f"imports the reference Model from {module}: a custom kernel is required",
                )

    # -- uses ----------------------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if (
            node.id
            in (
                "eval",
                "exec",
                "compile",
                "__import__",
                "__builtins__",
                "__loader__",
                "__spec__",
                "globals",
                "locals",
            )
            and node.id not in self.aliases
            and node.id not in self.bound
        ):
            self.add(node, "dynamic-code", f"uses {node.id}: code built at run time hides from this scan")
        elif node.id in DISPATCH_HOOKS:
            self.add(
                node, "tensor-subclass", f"uses {node.id}: a dispatch hook can defer or fake the computation"
            )
        elif self.require_kernel and node.id == "Model":
            self.add(node, "reference-fallback", "uses the reference Model: a custom kernel is required")
        elif node.id in self.aliases and isinstance(node.ctx, ast.Load):
            self.check_name(node, self.aliases[node.id])
            self.escaped(node)
            self.library_value(node, self.aliases[node.id])
            self.lookup_value(node, self.aliases[node.id])
        elif isinstance(node.ctx, ast.Load) and node.id not in self.bound:
            self.lookup_value(node, node.id)
            for module in self.star_modules:  # `fork()` after `from os import *` is os.fork
                if self.check_name(node, f"{module}.{node.id}"):
                    break

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if id(node) in self.exempt:
            return
        if node.attr in INTROSPECTIVE_ATTRS:
            self.add(
                node,
                "introspection",
                f"reads .{node.attr}: walks to code, globals or frames the harness keeps private",
            )
        elif node.attr in DISPATCH_HOOKS | SUBCLASS_ATTRS:
            self.add(
                node,
                "tensor-subclass",
                f"uses {node.attr}: a tensor subclass or dispatch hook can defer or fake the computation",
            )
        elif node.attr in IMPORT_ATTRS:
            self.add(node, "dynamic-code", f"reads .{node.attr}: code loaded by name hides from this scan")
        elif node.attr in ("__dict__", "__getattribute__", "__getattr__") and self.is_module_path(node.value):
            self.add(
                node,
                "dynamic-code",
                f"reads {self.dotted(node.value)}.{node.attr}: a module's names looked up by key hide "
                "what they reach from this scan",
            )
        name = self.dotted(node)
        if name is not None and self.is_module_path(node):
            self.check_name(node, name)
            self.escaped(node)
            self.library_value(node, name)
            self.lookup_value(node, name)
        else:
            # `g = object.__getattribute__`, `type(m).__getattribute__` taken as a value
            self.lookup_value(node, name if name in NAME_LOOKUPS else f"<object>.{node.attr}")
            self.generic_visit(node)

    def lookup_value(self, node: ast.expr, name: str) -> None:
        """getattr and its kin taken as values (`get = getattr`): the names their calls then reach are out of
        the sight of computed_name, which judges only their direct calls (round 22 reached gc so)."""
        lookup = name in NAME_LOOKUPS or name in ("vars", "hasattr", "<object>.__getattribute__")
        if lookup and id(node) not in self.called:
            self.add(
                node,
                "dynamic-code",
                f"takes {name} as a value: the names its calls reach hide from this scan",
            )

    def library_value(self, node: ast.expr, name: str) -> None:
        """A torch.library function or class taken as a value (`make = torch.library.Library`): its calls, under
        another name, would register kernels out of sight of the namespace check in visit_Call (round 21)."""
        if name.rsplit(".", 1)[-1] in ("Library", "_Library") and not name.startswith("torch.library."):
            # torch.library's class held by another module (`torch.backends.mps._Library`, round 24)
            self.add(node, "monkeypatch", f"uses {name}: torch.library's Library under another module's name")
        elif name.startswith("torch.library.") and id(node) not in self.called | self.type_uses:
            self.add(
                node,
                "monkeypatch",
                f"takes {name} as a value: registrations through it hide their namespace from this scan",
            )

    def visit_Call(self, node: ast.Call) -> None:
        self.called.add(id(node.func))
        name = self.dotted(node.func) or ""
        if name in ("isinstance", "issubclass") and len(node.args) == 2:
            self.as_type(node.args[1])
        if name in STREAM_WRAPPERS and any(
            isinstance(sub, ast.Attribute) and sub.attr in ("current_stream", "get_current_stream")
            for arg in node.args
            for sub in ast.walk(arg)
        ):
            self.exempt.add(id(node.func))
        if name in ("setattr", "delattr") and node.args:
            target = node.args[0]
            attr = self.fold(node.args[1]) if len(node.args) > 1 else None
            if self.is_module_path(target):
                self.patched(node, f"{self.dotted(target)}.{attr if attr is not None else '<computed>'}")
                self.exempt.add(id(target))
        if name in ("getattr", "hasattr") and len(node.args) >= 2 and self.fold(node.args[1]) is not None:
            self.exempt.add(id(node.args[0]))  # a known name on a module resolves like an attribute
        lookup = NAME_LOOKUPS.get(name)
        if lookup is not None and len(node.args) > lookup[1]:
            of = node.args[lookup[0]] if lookup[0] is not None else None
            self.computed_name(node, of, node.args[lookup[1]], name)
        elif (
            isinstance(node.func, ast.Attribute)
            and node.func.attr in ("__getattribute__", "__getattr__")
            and len(node.args) == 1
        ):
            self.computed_name(node, node.func.value, node.args[0], f".{node.func.attr}")
        elif name == "vars":
            space = node.args[0] if node.args else None
            if space is None or self.module_value(space) or self.is_module_path(space):
                self.add(
                    node,
                    "dynamic-code",
                    f"reads vars({self.dotted(space) if space is not None else ''}): a namespace's names "
                    "looked up by key hide what they reach from this scan",
                )
                if space is not None:
                    self.exempt.add(id(space))
        elif name in FD_OPENERS and node.args and self.fold_int(node.args[0]) is not None:
            self.add(
                node,
                "introspection",
                f"calls {name}({self.fold_int(node.args[0])}): a raw file descriptor could be the harness's channel",
            )
        elif name in ("os.putenv", "os.unsetenv") or (
            isinstance(node.func, ast.Attribute)
            and node.func.attr in ENVIRON_WRITERS
            and (self.dotted(node.func.value) or "") in ENVIRON
            and self.is_module_path(node.func.value)
        ):
            self.environ_written(node)
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
        if first is None:  # the namespace by keyword (attacker round 19: Library(ns="aten", ...))
            first = next((k.value for k in node.keywords if k.arg in ("ns", "qualname", "name")), None)
        if first is None:  # or spread from a mapping or a sequence (round 35: Library(**{"ns": "aten", ...}))
            first = next(
                (k.value for k in node.keywords if k.arg is None),
                next((a.value for a in node.args if isinstance(a, ast.Starred)), None),
            )
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
        elif (
            _under(name, "torch.library")
            and name != "torch.library.wrap_triton"  # given a Triton kernel, not a namespace
            and first is not None
            and not isinstance(first, ast.Constant)
        ):
            # A namespace built at run time may be aten's ("ATEN".lower(): attacker round 17).
            self.add(
                node,
                "monkeypatch",
                f"calls {name} with a namespace computed at run time: it may register kernels for aten",
            )
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        """`os.__dict__["system"]`, `vars(os)["fork"]`: a module's namespace read by key."""
        space = node.value
        target: ast.expr | None = None
        if isinstance(space, ast.Attribute) and space.attr == "__dict__":
            target = space.value
        elif isinstance(space, ast.Call) and (self.dotted(space.func) or "") == "vars" and space.args:
            target = space.args[0]
        if target is not None:
            self.computed_name(node, target, node.slice, "a namespace lookup")
        self.generic_visit(node)

    def environ_written(self, node: ast.AST) -> None:
        self.add(
            node,
            "monkeypatch",
            "writes os.environ: variables such as NVIDIA_TF32_OVERRIDE change how the reference and timer run",
        )

    def in_own_subclass(self) -> bool:
        """Inside a class whose bases are all classes this file defined before (a wrapper stacked on the
        candidate): super() reaches the candidate's own code, which is scanned too, not the reference."""
        bases = self.class_bases[-1] if self.class_bases else []
        return bool(bases) and all(b in self.defined_classes for b in bases)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.class_bases.append([self.dotted(b) or "" for b in node.bases])
        for base in node.bases:
            name = self.dotted(base) or ""
            if any(_under(name, b) for b in TENSOR_BASES):
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

    def as_type(self, node: ast.AST | None) -> None:
        """An expression used as a type (an annotation, isinstance's second argument): a class named there is
        not called through it, so library_value lets it be."""
        if node is not None:
            self.type_uses.update(id(n) for n in ast.walk(node))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        arguments = node.args
        named = [
            *arguments.posonlyargs,
            *arguments.args,
            *arguments.kwonlyargs,
            arguments.vararg,
            arguments.kwarg,
        ]
        for arg in named:
            self.as_type(arg.annotation if arg is not None else None)
        self.as_type(node.returns)
        if node.name in DISPATCH_HOOKS:
            self.add(
                node,
                "tensor-subclass",
                f"defines {node.name}: a dispatch hook can defer or fake the computation",
            )
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and id(node) not in self.docstrings:
            self.check_string(node, node.value)

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
            and (self.dotted(target.value) or "") in ENVIRON
            and self.is_module_path(target.value)
        ):
            self.environ_written(node)
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
            if target.attr in PRECISION_ATTRS and _under(name, "torch.backends"):
                self.precision_set(node, name, target.attr, value)
            elif not any(_under(name, ok) for ok in ALLOWED_SETTINGS):
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
        self.as_type(node.annotation)
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
        if self.allow_tf32 and attr in TF32_ATTRS and (const is True or const == "tf32"):
            return
        self.add(node, "precision-flag", f"sets {name}: lower precision than the operator's policy allows")

    def precision_call(self, node: ast.Call, name: str) -> None:
        if name == "torch.backends.cudnn.flags":
            # allow_tf32 defaults to True there: leaving it out (or passing it positionally, 5th) turns TF32 on.
            given = next((kw.value for kw in node.keywords if kw.arg == "allow_tf32"), None)
            if given is None and len(node.args) > CUDNN_FLAGS_TF32_POSITION:
                given = node.args[CUDNN_FLAGS_TF32_POSITION]
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
        if any(path in text for path in PROCESS_PATHS):  # also in comments: the AST cannot see every use
            findings.append(
                Finding(
                    number,
                    "introspection",
                    "mentions /proc/ or /dev/fd: process introspection could reach the harness's channel",
                )
            )
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return list(_lines(findings))
    scanner = _Scanner(allow_tf32=allow_tf32, require_kernel=require_kernel)
    try:
        scanner.collect(tree)
        scanner.visit(tree)
        scanner.check_strings(tree)
    except RecursionError:  # expressions nested thousands deep: no honest kernel, and unread is not passed
        scanner.too_deep = True
    if scanner.too_deep:
        message = "nests too deeply for this scan to read: unread code is not let through"
        scanner.findings.append(Finding(1, "dynamic-code", message))
    return list(_lines(findings + scanner.findings))
