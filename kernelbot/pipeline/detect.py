"""Pipeline stage 1: which operators a base..head diff added, modified, removed or touched only cosmetically."""

from __future__ import annotations

import ast
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kernelbot import gitrepo
from kernelbot.config import CONFIG_PATH, Config
from kernelbot.errors import ConfigError
from kernelbot.pipeline.csources import c_files, c_tokens, with_includes
from kernelbot.pipeline.sources import (
    MODULE_CODE,
    Bind,
    Closure,
    Definition,
    Key,
    Resolver,
    Side,
    closure_of,
    is_docstring,
    normalized,
)
from kernelbot.spec import KERNELBENCH_NAMES, OperatorSpec, declared_spec, kernelbench_spec, watched

# NOTE: detection reads commits only (git cat-file / ls-tree), never the working tree, so it is exact for the
# two SHAs whatever is checked out; a caller measuring "the checkout" should call gitrepo.require_clean first.

ChangeKind = Literal["added", "modified", "removed", "cosmetic"]
COSMETIC = "comments, docstrings or whitespace only"


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


def near_misses(repo: Path, base: str, head: str) -> list[str]:
    """Python files the change touched that define two of a KernelBench operator's three names but not the
    third: not operators, and a review would otherwise say nothing of them (a typo'd get_inputs)."""
    root = gitrepo.toplevel(repo)
    base_sha, head_sha = gitrepo.resolve(root, base), gitrepo.resolve(root, head)
    diff = gitrepo.changed_files(root, base_sha, head_sha)
    try:
        config = _Detector(root, base_sha, head_sha, diff).head.config()
    except ConfigError:
        return []  # the review says what is wrong with the config
    paths = [c.path for c in diff if c.status != "deleted" and _searched(c.path, config)]
    found = []
    for path, data in gitrepo.read_files(root, head_sha, paths).items():
        try:
            tree = ast.parse(data or b"")
        except (SyntaxError, ValueError):
            continue
        top = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
        present = [name for name in KERNELBENCH_NAMES if name in top]
        if len(present) == 2:
            (missing,) = set(KERNELBENCH_NAMES) - set(present)
            found.append(
                f"{path} defines {' and '.join(present)} but not {missing}: not measured as an operator "
                "(a KernelBench-form file defines class Model, get_inputs() and get_init_inputs())"
            )
    return found


def _searched(rel: str, config: Config) -> bool:
    """A Python file where operators are looked for: watched by the config, not in a hidden folder."""
    return (
        rel.endswith(".py")
        and not any(p.startswith(".") for p in rel.split("/")[:-1])
        and watched(rel, config)
    )


@dataclass
class _Op:
    """An operator as found at one side."""

    spec: OperatorSpec
    roots: dict[Key, str]  # entry point -> its role in reasons ("forward", "input factory get_inputs", ...)
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
        self.base = Side(root, base, "base", self.changed, cache)
        self.head = Side(root, head, "head", self.changed, cache)

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

    def _ops(self, side: Side, config: Config) -> dict[str, _Op]:
        ops: dict[str, _Op] = {}
        candidates = [
            rel
            for rel in gitrepo.grep_files(self.root, side.sha, "get_init_inputs", "*.py")
            if _searched(rel, config)
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
            roots: dict[Key, str] = {}
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

    def _entry(self, side: Side, target: str) -> Key:
        module, _, attr = target.partition(":")
        if module.endswith(".py"):
            return posixpath.normpath(module), attr
        ref = Resolver(side).find("", Bind(tuple(module.split(".")), 0, None))
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

    def _appeared(self, op: _Op, other: Side, missing: str, word: str) -> str:
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
        b, h = closure_of(self.base, list(before.roots)), closure_of(self.head, list(after.roots))
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

    def _sources(self, before: _Op, after: _Op, b: Closure, h: Closure) -> tuple[list[str], list[str]]:
        old = with_includes(self.base, [*before.spec.sources, *c_files(self.base, b.c_refs)])
        new = with_includes(self.head, [*after.spec.sources, *c_files(self.head, h.c_refs)])
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


def _label(key: Key, kind: str) -> str:
    path, name = key
    if name == MODULE_CODE:
        return f"module-level code in {path}"
    if kind == "import":
        return f"import of {name} in {path}"
    return f"{kind} {path}:{name}"


def _model_reasons(old: Definition, new: Definition) -> list[str]:
    """`forward changed`, `__init__ changed`, ... for the KernelBench Model class."""
    old_cls, new_cls = old.nodes[-1], new.nodes[-1]
    if not (isinstance(old_cls, ast.ClassDef) and isinstance(new_cls, ast.ClassDef)):
        return ["Model changed"]

    def members(cls: ast.ClassDef) -> tuple[dict[str, str], str]:
        methods, rest = {}, []
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                methods[stmt.name] = normalized(stmt)
            elif not is_docstring(stmt):
                rest.append(normalized(stmt))
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
