"""Pipeline stage 1: which operators a base..head diff added, modified, removed or touched only cosmetically."""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from kernelbot import gitrepo
from kernelbot.config import CONFIG_PATH, Config, parse_config
from kernelbot.errors import ConfigError
from kernelbot.spec import KERNELBENCH_NAMES, OperatorSpec, declared_spec, kernelbench_spec, watched

# NOTE: detection reads commits only (git cat-file / ls-tree), never the working tree, so it is exact for the
# two SHAs whatever is checked out; a caller measuring "the checkout" should call gitrepo.require_clean first.

ChangeKind = Literal["added", "modified", "removed", "cosmetic"]
C_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp")
MODULE_CODE = "<module>"  # pseudo-definition: a module's top-level code that binds no name (runs on import)
COSMETIC = "comments/whitespace only"
_Key = tuple[str, str]  # (path, top-level name) of one definition


@dataclass
class Change:
    """One operator the diff touched."""

    spec: OperatorSpec  # the operator at head (added, modified, cosmetic) or at base (removed)
    change: ChangeKind  # cosmetic: only comments, whitespace, docstrings or unused code in its files changed
    reasons: list[str]  # human-readable, e.g. "forward changed", "helper ops/common.py:act changed"
    base: OperatorSpec | None = None  # the operator at base (differs from spec after a rename); None if added

    @property
    def name(self) -> str:
        return self.spec.name


def detect(repo: Path, base: str, head: str, *, include_cosmetic: bool = True) -> list[Change]:
    """Operators added, modified, removed (and, if asked, cosmetic) between two revisions, sorted by name."""
    root = gitrepo.toplevel(repo)
    base_sha, head_sha = gitrepo.resolve(root, base), gitrepo.resolve(root, head)
    diff = gitrepo.changed_files(root, base_sha, head_sha)
    if not diff:
        return []
    found = _Detector(root, base_sha, head_sha, diff).run()
    return sorted((c for c in found if include_cosmetic or c.change != "cosmetic"), key=lambda c: c.name)


# -- one side of the diff ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Bind:
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
    imports: dict[str, list[_Bind]] = field(default_factory=dict)
    stars: list[_Bind] = field(default_factory=list)
    code: list[ast.stmt] = field(default_factory=list)
    kernelbench: bool = False  # same test as spec.is_kernelbench_source, on the tree parsed here
    # Definitions already normalized; an unchanged file is one _Module for both sides, so this is shared.
    memo: dict[str, _Def] = field(default_factory=dict)


@dataclass(frozen=True)
class _ModRef:
    file: str | None  # the module's file (x.py or pkg/__init__.py); None for a namespace package
    pkg: str | None  # the package directory, when it is a package


class _Side:
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


def _is_docstring(stmt: ast.stmt) -> bool:
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
        if body and _is_docstring(body[0]):
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
                    module.imports.setdefault(bound, []).append(_Bind(dotted, 0, None))
                    names.add(bound)
            elif isinstance(node, ast.ImportFrom):
                source = tuple(node.module.split(".")) if node.module else ()
                for alias in node.names:
                    if alias.name == "*":
                        module.stars.append(_Bind(source, node.level, None))
                        continue
                    bound = _bound(alias, False)
                    module.imports.setdefault(bound, []).append(_Bind(source, node.level, alias.name))
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


def _normalized(node: ast.AST, name: str | None = None) -> str:
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
class _Def:
    """One definition reached from an operator's entry points."""

    kind: str  # "helper", "constant", "import" or "code"
    dump: str  # normalized AST: equal dumps mean equal behaviour
    text: str  # source text: differs from the other side's with an equal dump on a cosmetic change
    nodes: list[ast.stmt]
    chains: frozenset[tuple[str, tuple[str, ...]]]  # names it reads, with attribute chains (see _Chains)
    strings: frozenset[str]  # string constants that name C/C++ files


@dataclass
class _Closure:
    """Everything an operator's entry points reach at one side."""

    defs: dict[_Key, _Def] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)  # Python files read (existing or not)
    broken: set[str] = field(default_factory=set)  # Python files that do not parse
    missing: set[_Key] = field(default_factory=set)  # entry points or imported names that are not defined
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


class _Resolver:
    """Follows names through the repository's modules at one side (absolute, relative and star imports)."""

    def __init__(self, side: _Side) -> None:
        self.side = side

    def _module_at(self, base: str) -> _ModRef | None:
        files = self.side.files
        if base and base + ".py" in files:
            return _ModRef(base + ".py", None)
        init = posixpath.join(base, "__init__.py")
        if init in files:
            return _ModRef(init, base)
        return _ModRef(None, base) if base and base in self.side.dirs else None

    def find(self, importer: str, bind: _Bind) -> _ModRef | None:
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

    def name(
        self, module: _Module, name: str, attrs: tuple[str, ...], out: set[_Key], depth: int = 0
    ) -> None:
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
        self, module: _Module, bind: _Bind, attrs: tuple[str, ...], out: set[_Key], depth: int, whole: bool
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

    def _into(self, ref: _ModRef, attrs: tuple[str, ...], out: set[_Key], depth: int, whole: bool) -> None:
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


def _closure(side: _Side, roots: list[_Key]) -> _Closure:
    resolver, result = _Resolver(side), _Closure()
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
        out: set[_Key] = {(path, MODULE_CODE)}
        for ref_name, attrs in definition.chains:
            resolver.name(module, ref_name, attrs, out)
        for bind in module.imports.get(name, []) if name != MODULE_CODE else []:
            resolver.follow(module, bind, (), out, 0, whole=False)  # an entry point that is itself imported
        result.c_refs.update((path, s) for s in definition.strings)
        todo.extend(out - seen)
    return result


def _definition(module: _Module, name: str, nodes: list[ast.stmt]) -> _Def:
    kind = "code" if name == MODULE_CODE else _kind(nodes)
    dump = "\n".join(_normalized(n, None if name == MODULE_CODE else name) for n in nodes)
    visitor = _Chains()
    for node in nodes:
        if not isinstance(node, ast.Import | ast.ImportFrom):
            visitor.visit(node)
    text = "\n".join(_segment(module, n) for n in nodes)
    return _Def(kind, dump, text, nodes, frozenset(visitor.chains), frozenset(visitor.strings))


def _kind(nodes: list[ast.stmt]) -> str:
    if all(isinstance(n, ast.Import | ast.ImportFrom) for n in nodes):
        return "import"
    if any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for n in nodes):
        return "helper"
    return "constant"


# -- C/C++ sources -------------------------------------------------------------------------------------

_C_TOKEN = re.compile(r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|\w+|\\\n|\n|\S""", re.S)
_C_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def c_tokens(text: str) -> list[str]:
    """C/C++/CUDA tokens without comments or whitespace (a preprocessor line keeps its line end)."""
    tokens: list[str] = []
    directive, line_start = False, True
    for match in _C_TOKEN.finditer(text):
        tok = match.group()
        if tok.startswith(("//", "/*")) or tok == "\\\n":
            continue
        if tok == "\n":
            if directive:
                tokens.append("\n")
            directive, line_start = False, True
            continue
        directive = directive or (line_start and tok == "#")
        line_start = False
        tokens.append(tok)
    return tokens


def _with_includes(side: _Side, paths: Iterable[str]) -> set[str]:
    """C/C++ files plus the quoted #includes they reach inside the repository."""
    todo, seen = list(paths), set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for inc in _C_INCLUDE.findall(side.text(path) or ""):
            for candidate in (
                posixpath.normpath(posixpath.join(posixpath.dirname(path), inc)),
                posixpath.normpath(inc),
            ):
                if candidate in side.files:
                    todo.append(candidate)
                    break
    return seen


def _c_files(side: _Side, refs: set[tuple[str, str]]) -> set[str]:
    """Resolve strings naming C/C++ files (load_inline, load(sources=...), RawModule(path=...))."""
    found: set[str] = set()
    for module_path, text in refs:
        rel = posixpath.normpath(text.removeprefix("./"))
        here = posixpath.dirname(module_path)
        direct = [p for p in (posixpath.normpath(posixpath.join(here, rel)), rel) if p in side.files]
        if direct:
            found.add(direct[0])
            continue
        suffix = [p for p in side.files if p.endswith("/" + rel.lstrip("./"))]
        near = [p for p in suffix if p.startswith(here + "/")] if here else suffix
        found.update(near or suffix)
    return found


# -- the comparison --------------------------------------------------------------------------------------


@dataclass
class _Op:
    """An operator as found at one side."""

    spec: OperatorSpec
    roots: dict[_Key, str]  # entry point -> its role in reasons ("forward", "input factory get_inputs", ...)
    broken: bool = False  # its file does not parse (found by its text)


_KB_TEXT = [
    re.compile(p, re.M) for p in (r"^class\s+Model\b", r"^def\s+get_inputs\b", r"^def\s+get_init_inputs\b")
]


class _Detector:
    def __init__(self, root: Path, base: str, head: str, diff: list[gitrepo.FileChange]) -> None:
        self.root, self.diff = root, diff
        self.changed = {p for c in diff for p in (c.path, c.old_path) if p}
        self.renamed = {c.old_path: c.path for c in diff if c.status == "renamed" and c.old_path}
        cache: dict[tuple[str, str], object] = {}
        self.base = _Side(root, base, "base", self.changed, cache)
        self.head = _Side(root, head, "head", self.changed, cache)

    def run(self) -> list[Change]:
        head_config = self.head.config()
        try:
            base_config = self.base.config()
        except ConfigError:
            base_config = head_config  # a PR that repairs a broken config is still reviewed, like for like
        base_ops, head_ops = self._ops(self.base, base_config), self._ops(self.head, head_config)
        pairs: list[tuple[_Op | None, _Op | None, list[str]]] = []
        for old, new in self.renamed.items():
            if old in base_ops and new in head_ops and new not in base_ops and old not in head_ops:
                pairs.append((base_ops.pop(old), head_ops.pop(new), [f"renamed from {old}"]))
        for key in sorted(base_ops.keys() | head_ops.keys()):
            pairs.append((base_ops.get(key), head_ops.get(key), []))
        changes = []
        for before, after, notes in pairs:
            change = self._change(before, after, notes)
            if change is not None:
                changes.append(change)
        return changes

    def _ops(self, side: _Side, config: Config) -> dict[str, _Op]:
        ops: dict[str, _Op] = {}
        candidates = [
            rel
            for rel in gitrepo.grep_files(self.root, side.sha, "get_init_inputs", "*.py")
            if not any(part.startswith(".") for part in rel.split("/")[:-1]) and watched(rel, config)
        ]
        side.prefetch(candidates)
        for rel in candidates:
            module = side.module(rel)
            if module is None:
                continue
            broken = module.error is not None
            if module.kernelbench or (broken and all(p.search(side.text(rel) or "") for p in _KB_TEXT)):
                roles = {
                    "Model": "Model",
                    "get_inputs": "input factory get_inputs",
                    "get_init_inputs": "input factory get_init_inputs",
                }
                ops[rel] = _Op(kernelbench_spec(rel), {(rel, n): r for n, r in roles.items()}, broken)
        for decl in config.operators:
            roots: dict[_Key, str] = {}
            for role, target in (
                ("callable", decl.callable),
                ("input factory", decl.inputs),
                ("reference", decl.reference),
            ):
                if target is not None:
                    path, attr = self._entry(side, target)
                    roots.setdefault((path, attr), f"{role} {path}:{attr}")
            ops["decl:" + decl.name] = _Op(declared_spec(decl), roots)
        return ops

    def _entry(self, side: _Side, target: str) -> _Key:
        module, _, attr = target.partition(":")
        if module.endswith(".py"):
            return posixpath.normpath(module), attr
        ref = _Resolver(side).find("", _Bind(tuple(module.split(".")), 0, None))
        return (ref.file if ref is not None and ref.file else module.replace(".", "/") + ".py"), attr

    def _change(self, before: _Op | None, after: _Op | None, notes: list[str]) -> Change | None:
        if before is None and after is not None:
            reasons = [self._appeared(after, self.base, "new file", "now")]
            return Change(after.spec, "added", reasons + ["does not parse at head"] * after.broken, None)
        if after is None and before is not None:
            reasons = [self._appeared(before, self.head, "file deleted", "no longer")]
            return Change(before.spec, "removed", reasons, before.spec)
        assert before is not None and after is not None
        modified, cosmetic = list(notes), []
        if before.broken or after.broken:
            modified += [
                f"does not parse at {s}" for s, op in (("base", before), ("head", after)) if op.broken
            ]
        else:
            m, c = self._compare(before, after)
            modified += m
            cosmetic += c
        if modified:
            return Change(after.spec, "modified", modified, before.spec)
        if cosmetic:
            return Change(after.spec, "cosmetic", list(dict.fromkeys(cosmetic)), before.spec)
        return None

    def _appeared(self, op: _Op, other: _Side, missing: str, word: str) -> str:
        """Why an operator exists at one side only; `other` is the side it is missing from."""
        if op.spec.kind == "declared":
            return f"{'declared in' if word == 'now' else 'no longer declared in'} {CONFIG_PATH}"
        if op.spec.path not in other.files:
            return missing
        module = other.module(op.spec.path)
        if module is None or not module.kernelbench:
            return f"{word} in KernelBench form"
        return f"{word} watched (paths in {CONFIG_PATH})"

    def _compare(self, before: _Op, after: _Op) -> tuple[list[str], list[str]]:
        modified: list[str] = []
        cosmetic: list[str] = []
        if before.spec.decl is not None and after.spec.decl is not None:
            old, new = before.spec.decl.model_dump(), after.spec.decl.model_dump()
            fields = [k for k in new if old.get(k) != new.get(k)]
            if fields:
                modified.append(f"config entry changed ({', '.join(fields)})")
        b, h = _closure(self.base, list(before.roots)), _closure(self.head, list(after.roots))
        roles = {**{(self.renamed.get(p, p), n): r for (p, n), r in before.roots.items()}, **after.roots}
        for side, closure in (("base", b), ("head", h)):
            for path in sorted(closure.broken & self.changed):
                modified.append(f"{path} does not parse at {side}")
            for path, name in sorted(closure.missing):
                if (path, name) in after.roots or (path, name) in before.roots:
                    modified.append(f"{roles.get((path, name), f'{path}:{name}')} not found at {side}")
        skip = {self.renamed.get(p, p) for p in b.broken | h.broken}
        missing = {k for k in {(self.renamed.get(p, p), n) for p, n in b.missing} | h.missing if k in roles}
        b_defs = {(self.renamed.get(p, p), n): d for (p, n), d in b.defs.items()}
        order = {k: i for i, k in enumerate(after.roots)}
        for key in sorted(b_defs.keys() | h.defs.keys(), key=lambda k: (order.get(k, len(order)), k)):
            if key[0] in skip or key in missing:
                continue  # a file that does not parse, or an entry point reported as not found
            old_def, new_def = b_defs.get(key), h.defs.get(key)
            label = roles.get(key) or _label(key, (new_def or old_def).kind)  # type: ignore[union-attr]
            if old_def is None or new_def is None:
                modified.append(f"{label} {'added' if old_def is None else 'removed'}")
            elif old_def.dump != new_def.dump:
                modified += _model_reasons(old_def, new_def) if label == "Model" else [f"{label} changed"]
            elif old_def.text != new_def.text and key[0] != after.spec.path:
                cosmetic.append(f"{COSMETIC} in {key[0]}")
        own_old = self.base.text(before.spec.path)
        own_new = self.head.text(after.spec.path)
        if own_old is not None and own_new is not None and own_old != own_new and not modified:
            old_mod, new_mod = self.base.module(before.spec.path), self.head.module(after.spec.path)
            same = old_mod is not None and new_mod is not None and old_mod.dump == new_mod.dump
            cosmetic.insert(
                0, COSMETIC if same else f"only code the operator does not use changed in {after.spec.path}"
            )
        m, c = self._sources(before, after, b, h)
        return modified + m, cosmetic + c

    def _sources(self, before: _Op, after: _Op, b: _Closure, h: _Closure) -> tuple[list[str], list[str]]:
        old = _with_includes(self.base, [*before.spec.sources, *_c_files(self.base, b.c_refs)])
        new = _with_includes(self.head, [*after.spec.sources, *_c_files(self.head, h.c_refs)])
        modified, cosmetic = [], []
        for path in sorted({self.renamed.get(p, p) for p in old} | new):
            original = next((p for p, q in self.renamed.items() if q == path), path)
            if original not in self.changed and path not in self.changed:
                continue
            text_old, text_new = self.base.text(original), self.head.text(path)
            if text_old == text_new:
                continue
            if text_old is None or text_new is None:
                modified.append(f"source {path} {'added' if text_old is None else 'removed'}")
            elif c_tokens(text_old) != c_tokens(text_new):
                modified.append(f"source {path} changed")
            else:
                cosmetic.append(f"{COSMETIC} in {path}")
        return modified, cosmetic


def _label(key: _Key, kind: str) -> str:
    path, name = key
    if name == MODULE_CODE:
        return f"module-level code in {path}"
    if kind == "import":
        return f"import of {name} in {path}"
    return f"{kind} {path}:{name}"


def _model_reasons(old: _Def, new: _Def) -> list[str]:
    """`forward changed`, `__init__ changed`, ... for the KernelBench Model class."""
    old_cls, new_cls = old.nodes[-1], new.nodes[-1]
    if not (isinstance(old_cls, ast.ClassDef) and isinstance(new_cls, ast.ClassDef)):
        return ["Model changed"]

    def members(cls: ast.ClassDef) -> tuple[dict[str, str], str]:
        methods, rest = {}, []
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                methods[stmt.name] = _normalized(stmt)
            elif not _is_docstring(stmt):
                rest.append(_normalized(stmt))
        header = "|".join(ast.dump(n) for n in [*cls.bases, *cls.keywords, *cls.decorator_list])
        return methods, header + "\n".join(rest)

    (old_methods, old_rest), (new_methods, new_rest) = members(old_cls), members(new_cls)
    reasons = []
    for name in sorted(old_methods.keys() | new_methods.keys(), key=lambda n: (n != "forward", n)):
        if name not in old_methods:
            reasons.append(f"{name} added")
        elif name not in new_methods:
            reasons.append(f"{name} removed")
        elif old_methods[name] != new_methods[name]:
            reasons.append(f"{name} changed")
    if old_rest != new_rest or len(old.nodes) != len(new.nodes):
        reasons.append("Model class body changed")
    return reasons or ["Model changed"]
