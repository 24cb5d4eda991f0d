"""Operator specs: what an operator is, where it lives, and the job the harness gets for it."""

from __future__ import annotations

import ast
import fnmatch
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kernelbot.config import Config, OperatorDecl
from kernelbot.errors import ConfigError

KERNELBENCH_NAMES = ("Model", "get_inputs", "get_init_inputs")


@dataclass(frozen=True)
class OperatorSpec:
    name: str  # "ops/gelu" for ops/gelu.py (KernelBench form) or the declared name
    kind: Literal["kernelbench", "declared"]
    path: str  # the file that defines it, relative to the repository root (posix)
    decl: OperatorDecl | None = None  # the config entry, for declared operators
    sources: tuple[str, ...] = field(default=())  # CUDA/C++ files it builds from

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "path": self.path,
            "decl": None if self.decl is None else self.decl.model_dump(mode="json"),
            "sources": list(self.sources),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OperatorSpec:
        decl = data.get("decl")
        return cls(
            name=data["name"],
            kind=data["kind"],
            path=data["path"],
            decl=None if decl is None else OperatorDecl.model_validate(decl),
            sources=tuple(data.get("sources") or ()),
        )

    def job(self, root: Path, device: str) -> dict[str, Any]:
        """The JSON job the sandbox worker loads (the harness knows nothing of Config)."""
        tol = self.decl.tolerance if self.decl else None
        job: dict[str, Any] = {
            "kind": self.kind,
            "root": str(root),
            "device": device,
            # The reference, both baselines and exact candidates run in full float32 whatever the precision
            # policy says: the policy only lets a candidate switch TF32 on inside its own calls, and such a
            # candidate is checked at TF32's tolerance and reported as a precision change (agents.base.job_at_precision).
            "allow_tf32": False,
            "atol": tol.atol if tol else None,
            "rtol": tol.rtol if tol else None,
            "own_atol": tol is not None,  # the author's statement of scale: compare's scale rule stays off
        }
        if self.kind == "kernelbench":
            job["file"] = self.path
        else:
            assert self.decl is not None
            job.update(
                callable=self.decl.callable,
                inputs=self.decl.inputs,
                reference=self.decl.reference,
                shapes=self.decl.shapes,
                dtypes=self.decl.dtypes,
                sparse_matrix=self.decl.sparse_matrix,
            )
        return job

    def spec_hash(self, root: Path) -> str:
        """Content hash of everything that defines the operator (its file, its sources, its config entry)."""
        digest = hashlib.sha256()
        for rel in (self.path, *self.sources):
            path = root / rel
            digest.update(
                rel.encode() + b"\0" + (path.read_bytes() if path.exists() else b"<missing>") + b"\0"
            )
        if self.decl is not None:
            digest.update(self.decl.model_dump_json().encode())
        return digest.hexdigest()[:16]

    def supports(self, device: str) -> bool:
        return self.decl is None or device in self.decl.devices


def missing_kernelbench_names(source: str | ast.Module) -> list[str]:
    """Which of Model, get_inputs and get_init_inputs the module (its text, or its parsed tree) does not
    define at top level (all of them for a file that does not parse)."""
    try:
        tree = source if isinstance(source, ast.Module) else ast.parse(source)
    except SyntaxError:
        return list(KERNELBENCH_NAMES)
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    return [name for name in KERNELBENCH_NAMES if name not in names]


def parse_source(path: Path, shown: str, wanted: str) -> ast.Module:
    """A Python file's syntax tree, or a one-line ConfigError naming it (`shown`) and what to pass instead."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{shown}: not UTF-8 text (byte {err.start}); pass {wanted}") from None
    try:
        return ast.parse(text, filename=shown)
    except SyntaxError as err:
        where = f"{shown}:{err.lineno}" if err.lineno else shown  # null bytes have no line
        raise ConfigError(f"{where}: {err.msg}; fix the syntax error") from None


def candidate_problem(path: Path, name: str = "ModelNew") -> str | None:
    """Why a candidate file cannot be what a KernelBench-form check loads (not UTF-8, a syntax error, no `name`
    bound at top level), as one line naming the file and the fix; None if it may be. Read before any timing,
    so that a missing class is not found only after the operator's baselines (a newcomer waited 17 s)."""
    try:
        tree = parse_source(path, str(path), f"a .py source file that defines {name}")
    except ConfigError as err:
        return str(err)
    bound: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            bound.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return None  # a star import may bind it: the load will tell
            bound |= {(a.asname or a.name).partition(".")[0] for a in node.names}
    if name in bound:
        return None
    return (
        f"{path}: defines no {name} at top level; add class {name}(nn.Module) taking the same constructor "
        "arguments as Model"
    )


def is_kernelbench_source(text: str) -> bool:
    """True when the module defines Model, get_inputs and get_init_inputs at top level."""
    return not missing_kernelbench_names(text)


def _matches(rel: str, patterns: list[str]) -> bool:
    return any(
        fnmatch.fnmatch(rel, p) or (p.startswith("**/") and fnmatch.fnmatch(rel, p[3:])) for p in patterns
    )


def watched(rel: str, config: Config) -> bool:
    return _matches(rel, config.paths.watch) and not _matches(rel, config.paths.ignore)


def declared_path(decl: OperatorDecl) -> str:
    module = decl.callable.partition(":")[0]
    return module if module.endswith(".py") else module.replace(".", "/") + ".py"


def kernelbench_spec(rel: str) -> OperatorSpec:
    return OperatorSpec(name=rel.removesuffix(".py"), kind="kernelbench", path=rel)


def declared_spec(decl: OperatorDecl) -> OperatorSpec:
    return OperatorSpec(
        name=decl.name, kind="declared", path=declared_path(decl), decl=decl, sources=tuple(decl.sources)
    )


def discover(root: Path, config: Config) -> list[OperatorSpec]:
    """Every operator in the tree: KernelBench-form files under the watched paths, then declared ones."""
    specs = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in Path(rel).parts[:-1]) or not watched(rel, config):
            continue
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        if is_kernelbench_source(text):
            specs.append(kernelbench_spec(rel))
    specs += [declared_spec(decl) for decl in config.operators]
    return specs


def resolve_operator(target: str, root: Path, config: Config) -> tuple[OperatorSpec, Path]:
    """A CLI argument (a file path or a declared name) -> its spec and the repository root it lives in."""
    decl = config.operator(target)
    if decl is not None:
        return declared_spec(decl), root
    path = Path(target)
    if not path.is_absolute():
        path = (Path.cwd() / path).resolve()
    if not path.exists():
        names = (
            "declared: " + ", ".join(op.name for op in config.operators)
            if config.operators
            else "none declared"
        )
        raise ConfigError(
            f"{target}: no such file and no declared operator of that name ({names}); pass a KernelBench-form .py file or a name from .github/kernelbot.yml"
        )
    if not path.is_file():
        raise ConfigError(f"{target}: is a directory, not a file; pass a KernelBench-form .py file")
    tree = parse_source(path, target, "a KernelBench-form .py source file")
    missing = missing_kernelbench_names(tree)
    if missing:
        wanted = {
            "Model": "class Model(nn.Module)",
            "get_inputs": "get_inputs()",
            "get_init_inputs": "get_init_inputs()",
        }
        said = ", ".join(wanted[name] for name in missing)
        raise ConfigError(
            f"{target}: not a KernelBench-form operator; it lacks {said} at top level (a KernelBench-form "
            "file defines class Model(nn.Module), get_inputs() and get_init_inputs())"
        )
    base = root.resolve()
    try:
        rel = path.relative_to(base).as_posix()
    except ValueError:
        base, rel = path.parent, path.name
    return kernelbench_spec(rel), base
