"""Sandbox side (judge and subject): turn a job description into callables (reference, subject) and an input factory."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

import torch

SPARSE_MATRIX = ("static", "per_call")  # what an operator may say of its sparse matrix input (Operator)
DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
}


class LoadError(Exception):
    """The operator (or the candidate) could not be loaded; `who` says which."""

    def __init__(self, who: str, message: str) -> None:
        super().__init__(message)
        self.who = who  # "operator" or "candidate"


@dataclass
class Case:
    """One input configuration of an operator: a shape/dtype pair for declared operators."""

    label: str  # shown in reasons, e.g. "shape=[1024, 1024] dtype=float32"
    make: Callable[[int], list[Any]]  # seed -> fresh input list on the job's device


def import_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def resolve(root: Path, target: str, who: str) -> Any:
    """'pkg/mod.py:attr' (a file under root) or 'pkg.mod:attr' (an importable module)."""
    module_part, _, attr = target.partition(":")
    try:
        if module_part.endswith(".py"):
            stem = Path(module_part).stem
            module = import_file(root / module_part, f"kernelbot_{who}_{stem}")
        else:
            module = importlib.import_module(module_part)
    except BaseException as exc:
        raise LoadError(who, f"importing {module_part} failed: {type(exc).__name__}: {exc}") from exc
    if not hasattr(module, attr):
        raise LoadError(who, f"{module_part} has no attribute {attr!r}")
    return getattr(module, attr)


def to_device(values: Sequence[Any], device: str) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def make_inputs(factory: Callable[[], Any], seed: int, device: str) -> list[Any]:
    """The factory's inputs for this seed, on the device. Made there directly (torch's default device):
    KernelBench factories build CPU tensors, and a CPU randn of a 512 MiB input takes 0.7 s (one thread,
    measured on the CI machine), several times per sandbox. A factory that cannot run so (it calls .numpy(),
    say) runs on the CPU, every time, so a seed still means the same inputs on that device."""
    if device != "cpu":
        try:
            seed_all(seed)
            with torch.device(device):
                return to_device(_listed(factory()), device)
        except Exception:
            pass
    seed_all(seed)
    return to_device(_listed(factory()), device)


def _listed(made: Any) -> list[Any]:
    """The factory's result as the forward's arguments: any iterable but a tensor (a bare tensor would be read
    row by row, and the forward would then get as many arguments as the tensor has rows)."""
    if isinstance(made, torch.Tensor):
        raise TypeError(
            f"get_inputs() returned a {type(made).__name__}, not a list: return a list of the forward's "
            "arguments, e.g. [x]"
        )
    return list(made)


def seed_all(seed: int) -> None:
    """The CPU generator and, where CUDA has started, each GPU's, seeded by their own (C) methods: the states
    torch.manual_seed leaves, without the Python it runs on the way. It seeds every device module, and where
    CUDA has not started it queues CUDA's seeding with a stack formatted by traceback and linecache, whose
    cache a subject can write: attacker round 50 hung code on a line there, which ran in every draw of inputs
    afresh with the sample's seed set, and sorted the next sample's inputs ahead."""
    _CPU_GENERATOR.manual_seed(seed)
    if torch.cuda.is_initialized():
        for generator in torch.cuda.default_generators:
            if type(generator) is not _GENERATOR:  # a tuple of the subject's objects would run their code
                raise RuntimeError("torch.cuda.default_generators holds something other than generators")
            generator.manual_seed(seed)
    elif torch.cuda.is_available():  # not started yet (no subject's code runs in such a process): queued
        torch.cuda.manual_seed_all(seed)


_CPU_GENERATOR, _GENERATOR = torch.default_generator, torch._C.Generator


class Operator:
    """The loaded operator: its reference, its cases, and how to build a subject from it."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.root = Path(job["root"])
        self.device = job["device"]
        # "per_call": the operator's sparse matrix is a new one on every call (a graph per batch), so the
        # timed calls each get a matrix object they have not seen (inputs.refresh); "static": the same one.
        self.sparse_matrix = job.get("sparse_matrix", "static")
        if str(self.root) not in sys.path:
            sys.path.insert(0, str(self.root))
        if job["kind"] == "kernelbench":
            self._load_kernelbench()
        else:
            self._load_declared()

    @property
    def per_call_matrix(self) -> bool:
        """Its sparse matrix is a new one on every call: each timed call gets one it has not seen."""
        return self.sparse_matrix == "per_call"

    # -- KernelBench form: class Model, get_inputs(), get_init_inputs() ---------------------------
    def _load_kernelbench(self) -> None:
        path = self.root / self.job["file"]
        try:
            module = import_file(path, "kernelbot_operator")
        except BaseException as exc:
            raise LoadError(
                "operator", f"importing {self.job['file']} failed: {type(exc).__name__}: {exc}"
            ) from exc
        for attr in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(module, attr):
                raise LoadError(
                    "operator",
                    f"{self.job['file']} defines no {attr}; KernelBench form needs Model, get_inputs and get_init_inputs",
                )
        self.module = module
        self.sparse_matrix = getattr(module, "SPARSE_MATRIX", "static")
        if self.sparse_matrix not in SPARSE_MATRIX:
            raise LoadError(
                "operator",
                f"{self.job['file']}: SPARSE_MATRIX is {self.sparse_matrix!r}; set it to 'static' (the same "
                "matrix every call) or 'per_call' (a new matrix each call), or leave it out (static)",
            )
        self.init_inputs = list(module.get_init_inputs())
        self.reference = self._build_model(module.Model, "operator")
        get_inputs, device = module.get_inputs, self.device

        # Reads nothing of `self` at call time: the sealed server's refresh runs it on the worker's main
        # thread (inputs drawn afresh), and this object's attributes are the subject's to write (round 41).
        def make(seed: int) -> list[Any]:
            return make_inputs(get_inputs, seed, device)

        self.cases = [Case("default", make)]
        self.operator = self.reference

    def _build_model(self, cls: Any, who: str, like: torch.nn.Module | None = None) -> torch.nn.Module:
        seed_all(self.job.get("init_seed", 0))
        try:
            model = cls(*self.init_inputs)
        except BaseException as exc:
            raise LoadError(
                who,
                f"constructing {cls.__name__}{tuple(self.init_inputs)} failed: {type(exc).__name__}: {exc}",
            ) from exc
        if like is not None:
            # Same weights as the reference wherever names and shapes agree, whatever the build order.
            ours, theirs = model.state_dict(), like.state_dict()
            shared = {k: v for k, v in theirs.items() if k in ours and ours[k].shape == v.shape}
            if shared:
                model.load_state_dict(shared, strict=False)
        model = model.to(self.device)
        model.eval()
        return model

    # -- declared in .github/kernelbot.yml ---------------------------------------------------------
    def _load_declared(self) -> None:
        job = self.job
        self.operator = resolve(self.root, job["callable"], "operator")
        factory = resolve(self.root, job["inputs"], "operator")
        self.reference = (
            resolve(self.root, job["reference"], "operator") if job.get("reference") else self.operator
        )
        accepted = set(inspect.signature(factory).parameters)
        shapes = job.get("shapes") or [None]
        device = self.device  # as in _load_kernelbench: `make` reads nothing of self at call time
        self.cases = []
        for shape in shapes:
            for dtype_name in job.get("dtypes") or ["float32"]:
                kwargs: dict[str, Any] = {}
                if shape is not None and "shape" in accepted:
                    kwargs["shape"] = tuple(shape)
                if "dtype" in accepted:
                    kwargs["dtype"] = DTYPES[dtype_name]
                if "device" in accepted:
                    kwargs["device"] = device
                frozen = MappingProxyType(kwargs)  # the dict itself out of reach

                def make(seed: int, kwargs: Mapping[str, Any] = frozen) -> list[Any]:
                    return make_inputs(lambda: factory(**kwargs), seed, device)

                label = f"shape={list(shape) if shape else 'default'} dtype={dtype_name}"
                self.cases.append(Case(label, make))

    # -- subjects ---------------------------------------------------------------------------------
    def subject(
        self, name: str, candidate: str | None = None, compile_mode: str | None = None
    ) -> Callable[..., Any]:
        """The callable under test: 'operator', 'eager' (the reference), 'compile', or 'candidate'."""
        if name == "operator":
            return self.operator
        if name == "eager":
            return self.reference
        if name == "compile":
            return torch.compile(self.reference, mode=compile_mode)
        if name == "candidate" and candidate is not None:
            return self._load_candidate(Path(candidate))
        raise ValueError(f"unknown subject {name!r}")

    def _load_candidate(self, path: Path) -> Callable[..., Any]:
        try:
            module = import_file(path, "kernelbot_candidate")
        except BaseException as exc:
            raise LoadError(
                "candidate", f"importing the candidate failed: {type(exc).__name__}: {exc}"
            ) from exc
        if self.job["kind"] == "kernelbench":
            if not hasattr(module, "ModelNew"):
                raise LoadError(
                    "candidate",
                    f"{path.name} defines no ModelNew (add class ModelNew(nn.Module), taking the same constructor "
                    "arguments as Model)",
                )
            assert isinstance(self.reference, torch.nn.Module)
            return self._build_model(module.ModelNew, "candidate", like=self.reference)
        attr = self.job["callable"].partition(":")[2]
        if not hasattr(module, attr):
            raise LoadError("candidate", f"the candidate defines no {attr}() with the operator's signature")
        return getattr(module, attr)
