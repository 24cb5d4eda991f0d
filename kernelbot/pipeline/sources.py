"""One side of a diff, for detection: each Python module parsed once, names resolved through imports to
their definitions, and an operator's closure (every definition its entry points reach)."""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kernelbot import gitrepo
from kernelbot.config import CONFIG_PATH, Config, parse_config
from kernelbot.errors import ConfigError
from kernelbot.spec import KERNELBENCH_NAMES

C_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp")
MODULE_CODE = "<module>"  # pseudo-definition: a module's top-level code that binds no name (runs on import)
Key = tuple[str, str]  # (path, top-level name) of one definition


@dataclass(frozen=True)
class Bind:
    """What an import binds a name to: a module (name None) or a name inside a module."""

    parts: tuple[str, ...]  # dotted module path, split
    level: int  # leading dots of a relative import
    name: str | None  # the imported attribute for `from m import name`


@dataclass
class _Module:
    """A parsed Python file: its top-level definitions by name and the code that binds nothing."""

    path: str
    lines: list[str]
    error: str | None = None  # the SyntaxError, when the file does not parse
    dump: str = ""  # the normalized AST of the whole file (main guard included)
    defs: dict[str, list[ast.stmt]] = field(default_factory=dict)
    imports: dict[str, list[Bind]] = field(default_factory=dict)
    stars: list[Bind] = field(default_factory=list)
    code: list[ast.stmt] = field(default_factory=list)
    kernelbench: bool = False  # same test as spec.is_kernelbench_source, on the tree parsed here
    # Definitions already normalized; an unchanged file is one _Module for both sides, so this is shared.
    memo: dict[str, Definition] = field(default_factory=dict)


@dataclass(frozen=True)
class _ModRef:
    file: str | None  # the module's file (x.py or pkg/__init__.py); None for a namespace package
    pkg: str | None  # the package directory, when it is a package


class Side:
    """Files of one commit, read lazily; unchanged files are read and parsed once for both sides."""

    def __init__(
        self, root: Path, sha: str, label: str, changed: set[str], cache: dict[tuple[str, str], object]
    ):
        self.root, self.sha, self.label, self.changed, self.cache = root, sha, label, changed, cache
        self.files = set(gitrepo.list_files(root, sha))
        self.dirs = {posixpath.dirname(p) for p in self.files}
        for d in list(self.dirs):
            while d:
                d = posixpath.dirname(d)
                self.dirs.add(d)

    def _key(self, kind: str, path: str) -> tuple[str, str]:
        return (f"{kind}:{self.sha}" if path in self.changed else kind, path)

    def text(self, path: str) -> str | None:
        if path not in self.files:
            return None
        key = self._key("text", path)
        if key not in self.cache:
            data = gitrepo.read_file(self.root, self.sha, path)
            self.cache[key] = None if data is None else data.decode("utf-8", errors="replace")
        value = self.cache[key]
        return value if isinstance(value, str) else None

    def prefetch(self, paths: Iterable[str]) -> None:
        """Read many files in one git call (the lazy reads would take one process each)."""
        todo = [p for p in paths if p in self.files and self._key("text", p) not in self.cache]
        for path, data in (gitrepo.read_files(self.root, self.sha, todo) if todo else {}).items():
            self.cache[self._key("text", path)] = (
                None if data is None else data.decode("utf-8", errors="replace")
            )

    def module(self, path: str) -> _Module | None:
        key = self._key("module", path)
        if key not in self.cache:
            text = self.text(path)
            self.cache[key] = None if text is None else _parse_module(path, text)
        value = self.cache[key]
        return value if isinstance(value, _Module) else None

    def config(self) -> Config:
        text = self.text(CONFIG_PATH)
        if text is None:
            return Config()
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(
                f"{CONFIG_PATH} at {self.label} {self.sha[:12]} is not valid YAML; fix the syntax"
            ) from exc
        try:
            return parse_config(data, CONFIG_PATH)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (at {self.label} {self.sha[:12]})") from None


def is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _is_main_guard(stmt: ast.stmt) -> bool:
    test = stmt.test if isinstance(stmt, ast.If) else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _scope_walk(stmt: ast.AST) -> Iterable[ast.AST]:
    """Nodes of a top-level statement that bind at module scope (function and class bodies excluded)."""
    todo = [stmt]
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))


def _parse_module(path: str, text: str) -> _Module:
    module = _Module(path, text.splitlines())
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:
        module.error = f"line {getattr(exc, 'lineno', '?')}: {getattr(exc, 'msg', exc)}"
        return module
    top = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    module.kernelbench = all(name in top for name in KERNELBENCH_NAMES)
    for node in ast.walk(tree):  # docstrings never change behaviour: drop them once, before any dump
        body = (
            node.body
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            else None
        )
        if body and is_docstring(body[0]):
            empty: list[ast.stmt] = [] if isinstance(node, ast.Module) else [ast.Pass()]
            node.body = body[1:] or empty  # type: ignore[attr-defined]
    module.dump = ast.dump(tree)
    for stmt in tree.body:
        if _is_main_guard(stmt):
            continue
        names: set[str] = set()
        for node in _scope_walk(stmt):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = _bound(alias, True)
                    dotted = tuple(alias.name.split(".")) if alias.asname else (bound,)
                    module.imports.setdefault(bound, []).append(Bind(dotted, 0, None))
                    names.add(bound)
            elif isinstance(node, ast.ImportFrom):
                source = tuple(node.module.split(".")) if node.module else ()
                for alias in node.names:
                    if alias.name == "*":
                        module.stars.append(Bind(source, node.level, None))
                        continue
                    bound = _bound(alias, False)
                    module.imports.setdefault(bound, []).append(Bind(source, node.level, alias.name))
                    names.add(bound)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
        for name in names:
            module.defs.setdefault(name, []).append(stmt)
        if not names:
            module.code.append(stmt)
    return module


def normalized(node: ast.AST, name: str | None = None) -> str:
    """ast.dump: no positions or comments (docstrings are gone at parse); an import dumps only `name`'s alias."""
    if isinstance(node, ast.Import) and name is not None:
        return "import " + ",".join(f"{a.name} as {a.asname}" for a in node.names if _bound(a, True) == name)
    if isinstance(node, ast.ImportFrom) and name is not None:
        where = "." * node.level + (node.module or "")
        return f"from {where} import " + ",".join(
            f"{a.name} as {a.asname}" for a in node.names if _bound(a, False) == name
        )
    return ast.dump(node)


def _bound(alias: ast.alias, plain_import: bool) -> str:
    """The name an import alias binds: `import a.b` binds a; `import a.b as c` and `from m import b as c` bind c."""
    if alias.asname:
        return alias.asname
    return alias.name.split(".")[0] if plain_import else alias.name


def _segment(module: _Module, node: ast.stmt) -> str:
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return "\n".join(module.lines[start - 1 : node.end_lineno])


@dataclass
class Definition:
    """One definition reached from an operator's entry points."""

    kind: str  # "helper", "constant", "import" or "code"
    dump: str  # normalized AST: equal dumps mean equal behaviour
    text: str  # source text: differs from the other side's with an equal dump on a cosmetic change
    nodes: list[ast.stmt]
    chains: frozenset[tuple[str, tuple[str, ...]]]  # names it reads, with attribute chains (see _Chains)
    strings: frozenset[str]  # string constants that name C/C++ files


@dataclass
class Closure:
    """Everything an operator's entry points reach at one side."""

    defs: dict[Key, Definition] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)  # Python files read (existing or not)
    broken: set[str] = field(default_factory=set)  # Python files that do not parse
    missing: set[Key] = field(default_factory=set)  # entry points or imported names that are not defined
    c_refs: set[tuple[str, str]] = field(default_factory=set)  # (module path, string naming a C/C++ file)


class _Chains(ast.NodeVisitor):
    """Names a node reads, each with the attribute chain after it: `common.act(x)` -> ("common", ("act",))."""

    def __init__(self) -> None:
        self.chains: set[tuple[str, tuple[str, ...]]] = set()
        self.strings: set[str] = set()

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attrs, cur = [], node
        while isinstance(cur, ast.Attribute):
            attrs.append(cur.attr)
            cur = cur.value  # type: ignore[assignment]
        if isinstance(cur, ast.Name):
            self.chains.add((cur.id, tuple(reversed(attrs))))
        else:
            self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        self.chains.add((node.id, ()))

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and node.value.endswith(C_SUFFIXES) and "\n" not in node.value:
            self.strings.add(node.value)


class Resolver:
    """Follows names through the repository's modules at one side (absolute, relative and star imports)."""

    def __init__(self, side: Side) -> None:
        self.side = side

    def _module_at(self, base: str) -> _ModRef | None:
        files = self.side.files
        if base and base + ".py" in files:
            return _ModRef(base + ".py", None)
        init = posixpath.join(base, "__init__.py")
        if init in files:
            return _ModRef(init, base)
        return _ModRef(None, base) if base and base in self.side.dirs else None

    def find(self, importer: str, bind: Bind) -> _ModRef | None:
        here = posixpath.dirname(importer)
        if bind.level:
            anchor = here
            for _ in range(bind.level - 1):
                anchor = posixpath.dirname(anchor)
            return (
                self._module_at(posixpath.join(anchor, *bind.parts)) if bind.parts else _ModRef(None, anchor)
            )
        # The harness puts the repository root on sys.path; src/ layouts and sibling imports are common too.
        for anchor in dict.fromkeys(["", "src", here]):
            ref = self._module_at(posixpath.join(anchor, *bind.parts))
            if ref is not None:
                return ref
        return None

    def _submodule(self, ref: _ModRef, name: str) -> _ModRef | None:
        return self._module_at(posixpath.join(ref.pkg, name)) if ref.pkg is not None else None

    def name(self, module: _Module, name: str, attrs: tuple[str, ...], out: set[Key], depth: int = 0) -> None:
        """Add the definitions `name.attrs` read in `module` reaches to `out`."""
        if depth > 40:
            return
        if name in module.defs:
            out.add((module.path, name))
            for bind in module.imports.get(name, []):
                self.follow(module, bind, attrs, out, depth + 1, whole=True)
            return
        for star in module.stars:
            ref = self.find(module.path, star)
            target = self.side.module(ref.file) if ref and ref.file else None
            if target is not None and name in target.defs:
                self.name(target, name, attrs, out, depth + 1)
                return

    def follow(
        self, module: _Module, bind: Bind, attrs: tuple[str, ...], out: set[Key], depth: int, whole: bool
    ) -> None:
        ref = self.find(module.path, bind)
        if ref is None:
            return  # outside the repository (torch, numpy, ...)
        if bind.name is None:
            self._into(ref, attrs, out, depth, whole)
            return
        sub = self._submodule(ref, bind.name)
        if sub is not None and (ref.file is None or bind.name not in self._defs(ref.file)):
            self._into(sub, attrs, out, depth, whole)  # `from pkg import submodule`
            return
        if ref.file is None:
            return
        out.add((ref.file, MODULE_CODE))
        target = self.side.module(ref.file)
        if target is not None and target.error is None and (bind.name in target.defs or target.stars):
            self.name(target, bind.name, attrs, out, depth + 1)
        else:
            out.add((ref.file, bind.name))  # the closure records it as broken or missing

    def _defs(self, path: str) -> dict[str, list[ast.stmt]]:
        target = self.side.module(path)
        return target.defs if target is not None else {}

    def _into(self, ref: _ModRef, attrs: tuple[str, ...], out: set[Key], depth: int, whole: bool) -> None:
        if ref.file is not None:
            out.add((ref.file, MODULE_CODE))
        if not attrs:
            if whole and ref.file is not None:  # the module object itself is used: depend on all of it
                out.update((ref.file, n) for n in self._defs(ref.file))
            return
        first, rest = attrs[0], attrs[1:]
        target = self.side.module(ref.file) if ref.file else None
        if target is not None and first in target.defs:
            self.name(target, first, rest, out, depth + 1)
            return
        sub = self._submodule(ref, first)
        if sub is not None:
            self._into(sub, rest, out, depth + 1, whole)


def closure_of(side: Side, roots: list[Key]) -> Closure:
    resolver, result = Resolver(side), Closure()
    todo, seen = list(roots), set()
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        path, name = key
        result.files.add(path)
        module = side.module(path)
        if module is None or module.error is not None:
            if module is not None:
                result.broken.add(path)
            elif name != MODULE_CODE:
                result.missing.add(key)
            continue
        nodes = module.code if name == MODULE_CODE else module.defs.get(name, [])
        if not nodes:
            if name != MODULE_CODE:
                result.missing.add(key)
            continue
        definition = module.memo.get(name) or _definition(module, name, nodes)
        module.memo[name] = result.defs[key] = definition
        out: set[Key] = {(path, MODULE_CODE)}
        for ref_name, attrs in definition.chains:
            resolver.name(module, ref_name, attrs, out)
        for bind in module.imports.get(name, []) if name != MODULE_CODE else []:
            resolver.follow(module, bind, (), out, 0, whole=False)  # an entry point that is itself imported
        result.c_refs.update((path, s) for s in definition.strings)
        todo.extend(out - seen)
    return result


def _definition(module: _Module, name: str, nodes: list[ast.stmt]) -> Definition:
    kind = "code" if name == MODULE_CODE else _kind(nodes)
    dump = "\n".join(normalized(n, None if name == MODULE_CODE else name) for n in nodes)
    visitor = _Chains()
    for node in nodes:
        if not isinstance(node, ast.Import | ast.ImportFrom):
            visitor.visit(node)
    text = "\n".join(_segment(module, n) for n in nodes)
    return Definition(kind, dump, text, nodes, frozenset(visitor.chains), frozenset(visitor.strings))


def _kind(nodes: list[ast.stmt]) -> str:
    if all(isinstance(n, ast.Import | ast.ImportFrom) for n in nodes):
        return "import"
    if any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for n in nodes):
        return "helper"
    return "constant"
