"""Subject side: what untrusted code must leave as it found it (timers, sync, precision flags, threads)."""

from __future__ import annotations

import builtins
import contextlib
import importlib.machinery
import os
import random
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.autograd.grad_mode
import torch.library
import torch.nn.functional
import torch.utils._contextlib

from kernelbot.harness import compare, link, protocol, sealed, timing

# The interpreter's own list of threads, bound before any subject code runs: threading.enumerate reads
# threading._active, a dict anyone can put an object into whose `ident` property runs in the guard's call.
_thread_ids = sys._current_frames


def _watched() -> dict[str, Callable[[], Any]]:
    """Name -> getter of each object a candidate could patch to fake its timing or correctness."""
    watched: dict[str, Callable[[], Any]] = {
        "time.perf_counter_ns": lambda: time.perf_counter_ns,
        "time.perf_counter": lambda: time.perf_counter,
        "time.monotonic": lambda: time.monotonic,
        "torch.cuda.synchronize": lambda: torch.cuda.synchronize,
        "torch.cuda.Event": lambda: torch.cuda.Event,
        "torch.cuda.Event.record": lambda: torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": lambda: torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": lambda: torch.cuda.Event.synchronize,
        "torch.Tensor": lambda: torch.Tensor,
        "torch.Tensor.__sub__": lambda: torch.Tensor.__sub__,
        "torch.equal": lambda: torch.equal,
        "torch.allclose": lambda: torch.allclose,
        "torch.isnan": lambda: torch.isnan,
        "torch.abs": lambda: torch.abs,
        "torch.manual_seed": lambda: torch.manual_seed,
        "torch.randn": lambda: torch.randn,
        "torch.rand": lambda: torch.rand,
        "torch.Tensor.clone": lambda: torch.Tensor.clone,
    }
    return watched


_UNWATCHED = frozenset(
    {"sys", "warnings", "__main__"}
)  # honest code swaps their attributes (streams, showwarning)


def _namespaces() -> dict[str, Any]:
    """Name -> module or class whose every attribute the reference or the harness looks up at call time.

    Replacing `torch.matmul`, `nn.Module.__call__`, `builtins.bool` or `compare.compare` fools the
    reference and the checks together, so each attribute's identity is verified, not only the timers.
    """
    spaces: dict[str, Any] = {
        "builtins": builtins,
        "os": os,  # the worker's pipes and files: a function replaced there runs in the harness's own calls
        "time": time,
        "torch": torch,
        "torch.Tensor": torch.Tensor,
        "torch.nn.functional": torch.nn.functional,
        "torch.linalg": torch.linalg,
        "torch.fft": torch.fft,
        "torch.special": torch.special,
        # seeding: torch.manual_seed looks its device hooks up here at call time (attacker round 39 replaced
        # _seed_custom_device and ran its code in the harness's input draw)
        "torch.random": torch.random,
        **(
            {"torch.cuda.random": sys.modules["torch.cuda.random"]}
            if "torch.cuda.random" in sys.modules
            else {}
        ),
        "kernelbot.harness.compare": compare,
        "kernelbot.harness.timing": timing,
        "kernelbot.harness.timing.Timer": timing.Timer,
        "kernelbot.harness.protocol": protocol,
        "kernelbot.harness.link": link,
        "kernelbot.harness.guards": sys.modules[__name__],
        "kernelbot.harness.guards.Integrity": Integrity,
    }
    for name, value in vars(torch.nn).items():
        if isinstance(value, type) and issubclass(value, torch.nn.Module):
            spaces[f"torch.nn.{name}"] = value
    # Every harness module loaded in this process, and the modules they use: the worker's helpers look their
    # names up at call time (an attacker replaced kernelbot.harness.inputs._reorder and did a sample's work
    # inside the refresh). Not sys or warnings, whose attributes honest code swaps (streams, showwarning).
    # Their classes too: a method is looked up on its class at call time (round 10 replaced
    # audit.Hook.__call__, which Python calls on every audit event, and did the work as outputs were copied).
    for name, module in list(sys.modules.items()):
        if name == "kernelbot" or name.startswith("kernelbot."):
            spaces.setdefault(name, module)
            for attr, used in vars(module).items():
                if isinstance(used, types.ModuleType) and used.__name__ not in _UNWATCHED:
                    spaces.setdefault(used.__name__, used)
                elif isinstance(used, type) and used.__module__ == name:
                    spaces.setdefault(f"{name}.{attr}", used)
    # Classes of other modules whose methods the subject process calls once untrusted code is loaded, looked
    # up on the class at call time (on Python 3.11 setting a class attribute raises no audit event): the
    # refresh's random.Random (round 11), the capture fallback's contextlib.suppress, threading.Thread.
    # importlib's ModuleSpec: every import (torch's C++ makes some inside the refresh) reads a module's
    # __spec__._initializing, which a property on the class would answer (attacker round 26's probe).
    for cls in (random.Random, contextlib.suppress, threading.Thread, importlib.machinery.ModuleSpec):
        spaces.setdefault(f"{cls.__module__}.{cls.__qualname__}", cls)
    # json's own modules: `import json` binds the package alone, but json.dumps and json.loads look their
    # helpers up in json.encoder and json.decoder at call time (round 9 replaced c_make_encoder).
    for name in ("json.encoder", "json.decoder", "json.scanner"):
        if name in sys.modules:
            spaces.setdefault(name, sys.modules[name])
    # Grad-mode context managers: their __enter__/__exit__ are looked up on the class when a block starts and
    # ends (round 6 replaced no_grad.__exit__ to work after the refresh).
    for module in (torch.autograd.grad_mode, torch.utils._contextlib):
        for name, value in vars(module).items():
            if isinstance(value, type) and value.__module__ == module.__name__:
                spaces[f"{module.__name__}.{name}"] = value
    return spaces


_HOOKS = frozenset({"__getattr__", "__getattribute__", "__setattr__", "__del__"})


def _added(space: str, obj: Any, attr: str, value: Any) -> list[str]:
    """A name added to a watched namespace that changes what the harness's code finds (sealed.build holds
    each copy and check to the same rule, with the same constants; the guard is stricter in one point: a hook
    name or a base's name added to a class is refused even with a plain value): to a class, anything but a plain value (a descriptor overrides
    its instances' own attributes, a hook name or a base's name changes every lookup); to a module, a
    builtin's name (its functions then find the module's instead: attacker round 26's `zip` in
    kernelbot.harness.inputs) or, for the harness's own modules, any name."""
    if isinstance(obj, type):
        shadows = attr in _HOOKS or any(attr in vars(base) for base in obj.__mro__[1:])
        if shadows or not any(type(value) is plain for plain in sealed.PLAIN_VALUES):
            return [f"{space}.{attr} was added to the class"]
        return []
    if attr in sealed.SHADOWING_NAMES or space == "kernelbot" or space.startswith("kernelbot."):
        return [f"{space}.{attr} was added (it shadows a builtin for the module's code)"]
    return []


# Replaced by torch itself when torch.compile first runs (dynamo's mutation guard); construction and
# unpickling are over for the reference before the candidate is imported, so they cannot change its result.
# random._sha512: Python 3.13 imports it on the first seed from a string (an honest candidate's). sysconfig's
# lazily filled variables are filled by audit.build's get_paths() before the snapshot.
_MAY_CHANGE = frozenset({"torch.nn.Module.__init__", "torch.nn.Module.__setstate__", "random._sha512"})


# The code of torch._disable_dynamo's wrapper, taken at import: calling _disable_dynamo at guard time would
# run functools.wraps, looked up then (a subject's replacement of it ran inside the guard so).
_disable_dynamo = getattr(torch, "_disable_dynamo", None)
REWRAP_CODE = getattr(_disable_dynamo(lambda: None), "__code__", None) if _disable_dynamo else None


def _rewrapped_by_torch(new: Any, old: Any) -> bool:
    """Whether `new` is torch._disable_dynamo's wrapper around `old` itself.

    Importing torch._dynamo (any torch.compile) rewraps torch.manual_seed that way: a new object with the
    same behaviour, which an honest candidate must not be rejected for. The wrapper's code object and its
    closure are checked, not its name or __wrapped__, which anyone can set; nothing is called.
    """
    # Exact types first: a stand-in of the subject's could answer __code__ and __closure__ as it pleased.
    if REWRAP_CODE is None or type(new) is not types.FunctionType or new.__code__ is not REWRAP_CODE:
        return False
    cells = new.__closure__ or ()
    return any(type(c) is types.CellType and c.cell_contents is old for c in cells)


# Every dispatch key but the Meta ones (sealed.META_KEYS: one list, the copy holds the same).
_KEYS = tuple(k for k in torch._C.DispatchKey.__members__ if k not in sealed.META_KEYS)


# torch._C's functions the guard calls, bound before any untrusted code runs: torch._C is no watched namespace
# (a replaced _len_torch_function_stack would hide a mode from the check that looks for one).
_dump = torch._C._dispatch_dump
_registrations = torch._C._dispatch_get_registrations_for_dispatch_key
_function_modes, _dispatch_modes = torch._C._len_torch_function_stack, torch._C._len_torch_dispatch_stack
_mode_keys = tuple(torch._C._TorchDispatchModeKey.__members__.values())
_mode_at = torch._C._get_dispatch_mode


def _aten_overrides() -> frozenset[str]:
    """Every ATen operator's kernel registration on those keys, as the dispatcher holds them (`aten::op@KEY`).

    A kernel registered later (torch.library, or torch._C's dispatcher library, which torch.library's own
    bookkeeping never sees) replaces the operator for every caller in this process: the harness's copy of
    the outputs included, where it could compute what the timed calls did not. ~17 ms on the CPU.
    """
    found = []
    for key in _KEYS:
        try:
            names = _registrations(key)
        except (RuntimeError, ValueError):  # a key this build does not have
            continue
        found += [f"{name}@{key}" for name in names if name.startswith("aten::")]
    return frozenset(found)


# The ATen operators the harness itself runs in the subject process once untrusted code is loaded: the refresh
# (inputs.refresh, sparse matrices and renewed ones included) and the arm step; tests/test_inputs.py traces the
# first and checks that this list covers it (the outputs' copy holds its own: sealed.TORCH_PATH_OPS). The input factory's own are traced when a candidate is loaded (ops_run_by).
_LISTED_OPS = (
    "aten::_local_scalar_dense", "aten::_unsafe_view", "aten::add_.Scalar", "aten::add_.Tensor", "aten::alias",
    "aten::all", "aten::ge.Tensor", "aten::item", "aten::le.Tensor", "aten::lt.Scalar", "aten::lt.Tensor", "aten::rand.generator",
    "aten::where.self", "aten::arange", "aten::arange.start",
    "aten::ccol_indices", "aten::clone", "aten::col_indices", "aten::contiguous", "aten::copy_",
    "aten::crow_indices", "aten::detach", "aten::empty.memory_format", "aten::fill_.Scalar", "aten::full",
    "aten::index.Tensor", "aten::index_select", "aten::mul_.Scalar", "aten::mul_.Tensor", "aten::randperm", "aten::repeat",
    "aten::randperm.generator", "aten::remainder_.Scalar", "aten::reshape", "aten::row_indices",
    "aten::slice.Tensor", "aten::sparse_compressed_tensor.comp_plain_value_size", "aten::to_dense",
    "aten::unsqueeze", "aten::values", "aten::view", "aten::view.dtype", "aten::_to_dense", "aten::zeros",
)  # fmt: skip


# Operators the listed ones call inside their own kernels (torch.rand's CPU kernel calls uniform_, repeat calls
# expand and unfold, ...): a kernel of the subject's registered over one of them runs inside the refresh while
# every listed operator's kernels stay as they were (attacker round 35 registered aten::uniform_'s for the CPU,
# was handed the refresh's generator there, and replayed the refresh to compute each set's product). Found by
# profiling the refresh's paths; test_inputs.py::test_every_operator_the_refresh_runs_is_watched keeps it whole.
NESTED_OPS = (
    "add", "cat", "expand", "expand_as", "flatten", "mul", "narrow", "normal_", "permute", "random_",
    "resize_", "scalar_tensor", "unfold", "uniform_", "_sparse_compressed_tensor_unsafe", "as_strided",
    "empty_like", "empty_strided", "to", "_reshape_alias", "select",
    "gather",  # CUDA's one-index reordering (seen on an H100, torch 2.11)
)  # fmt: skip


def with_overloads(bases: Iterable[str]) -> tuple[str, ...]:
    """Every dispatcher overload of each aten operator named ("aten::add.Tensor", "aten::add.Scalar", ...)."""
    found = []
    for base in bases:
        packet = getattr(torch.ops.aten, base, None)
        for overload in packet.overloads() if packet is not None else ():
            try:  # TorchScript's own overloads (add.t, add.str) are not the dispatcher's
                torch._C._dispatch_find_schema_or_throw(
                    f"aten::{base}", "" if overload == "default" else overload
                )
            except RuntimeError:
                continue
            found.append(f"aten::{base}" if overload == "default" else f"aten::{base}.{overload}")
    return tuple(found)


# Every overload of each (the profiler names operators, not overloads; a check holds 113 in ~1.4 ms on the CPU)
HARNESS_OPS = with_overloads(
    sorted({n.removeprefix("aten::").split(".")[0] for n in _LISTED_OPS} | set(NESTED_OPS))
)


def ops_run_by(fn: Callable[[], Any]) -> set[str]:
    """The ATen operators fn() runs (an input factory, which a refresh that draws inputs afresh runs between
    the timed calls): traced once, before any untrusted code is loaded."""
    return run_by(fn)[0]


def run_by(fn: Callable[[], Any]) -> tuple[set[str], dict[str, types.ModuleType]]:
    """What fn() runs (an input factory, which a draw of inputs afresh runs between the timed calls), traced
    once before any untrusted code is loaded: the ATen operators, and the modules whose Python functions it
    calls (each looks names up in its module's globals at call time: seeding looks up torch.cuda's, and on a
    machine without CUDA queues its call with a stack formatted by traceback and linecache; attacker round
    48 replaced torch.cuda.is_available and computed each set's product in the draw)."""
    # The profiler, not a dispatch mode: it sees the operators the factory's kernels call too (randn's
    # normal_), where a kernel of the subject's would run just as well (NESTED_OPS); it names operators, so
    # each is watched with every overload.
    names: set[str] = set()

    def called(frame: Any, event: str, _: Any) -> None:
        if event == "call":
            name = frame.f_globals.get("__name__")
            if type(name) is str:
                names.add(name)

    previous = sys.getprofile()
    with torch.autograd.profiler.profile() as profiled:
        sys.setprofile(called)
        try:
            fn()
        finally:
            sys.setprofile(previous)
    ran = {e.name.removeprefix("aten::") for e in profiled.function_events if e.name.startswith("aten::")}
    modules = {
        name: sys.modules[name]
        for name in sorted(names)
        if isinstance(sys.modules.get(name), types.ModuleType)
    }
    return set(with_overloads(sorted(ran))), modules


def _runs_code(value: Any) -> bool:
    """A value of a traced module's that is code or leads to it: held by identity (data is held by its type)."""
    return callable(value) or isinstance(value, types.ModuleType)


def _harness_kernels(ops: tuple[str, ...]) -> dict[str, str]:
    """Each of the operators' registrations (HARNESS_OPS and the factory's) as the dispatcher lists them. A kernel registered over
    an existing one (torch.library or torch._C's dispatcher library, for a key the operator already has)
    shows there as a new line with the old one marked inactive; the registration names that _aten_overrides
    reads do not change then. ~0.5 ms on the CPU."""
    found = {}
    for name in ops:
        try:
            lines = _dump(name).splitlines()
        except RuntimeError:  # an operator this build does not have
            continue
        # All but the Meta keys (torch.compile may add a Meta kernel; none runs for a tensor with data).
        found[name] = "\n".join(line for line in lines if _key_of(line) not in sealed.META_KEYS)
    return found


def _key_of(line: str) -> str:
    """The dispatch key of one line of a dump ("CPU (inactive): registered at ...", "Autograd[alias]: ...")."""
    return line.partition(":")[0].removesuffix(" (inactive)").removesuffix("[alias]")


_included, _excluded = torch._C._dispatch_tls_local_include_set, torch._C._dispatch_tls_local_exclude_set
_keys_text = torch._C.DispatchKeySet.__repr__
_THREAD_KEYS = (_keys_text(_included()), _keys_text(_excluded()))  # before any subject code runs


def active_modes() -> list[str]:
    """Modes active on torch's stacks, and the thread's dispatch-key sets changed (the Python dispatcher left
    on runs operators' py_impl kernels): each runs on every torch call after it, the harness's own included."""
    active = []
    if (_keys_text(_included()), _keys_text(_excluded())) != _THREAD_KEYS:
        active.append("changed dispatch keys of the thread")
    for kind, depth in (("function", _function_modes()), ("dispatch", _dispatch_modes())):
        if depth:
            active.append(f"{depth} torch {kind} mode(s)")
    for key in _mode_keys:
        if _mode_at(key) is not None:
            active.append(f"the {key.name.lower()} dispatch mode")
    return active


# The precision flags as torch._C holds them, read through getters bound here: torch.backends' flags are
# properties of Python classes (cuBLASModule.__getattr__, ContextProp.__get__) that a subject could patch to
# report what the guard last saw (found by profiling the guard's own calls, tests/test_call_paths.py).
_FLAG_GETTERS = types.MappingProxyType(
    {  # read-only: the guard on the main thread calls each value
        name: getattr(torch._C, getter)
        for name, getter in (
            ("matmul.allow_tf32", "_get_cublas_allow_tf32"),
            ("cudnn.allow_tf32", "_get_cudnn_allow_tf32"),
            ("float32_matmul_precision", "_get_float32_matmul_precision"),
            (
                "matmul.allow_fp16_reduced_precision_reduction",
                "_get_cublas_allow_fp16_reduced_precision_reduction",
            ),
            (
                "matmul.allow_bf16_reduced_precision_reduction",
                "_get_cublas_allow_bf16_reduced_precision_reduction",
            ),
        )
        if hasattr(torch._C, getter)
    }
)


def precision_flags() -> dict[str, Any]:
    return {name: get() for name, get in _FLAG_GETTERS.items()}


def pin_precision(allow_tf32: bool) -> None:
    """The same flags on every side; TF32 only where the operator's policy allows it."""
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.allow_tf32 = allow_tf32
    torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")


_listdir = os.listdir
_open = open


def native_threads() -> set[int] | None:
    """This process's threads as the kernel lists them: Python's and those no Python object stands for (torch's
    inter-op pool that a scripted fork starts, an extension's own); None where the list cannot be read."""
    try:
        return {int(tid) for tid in _listdir("/proc/self/task")}
    except OSError:
        return None


def last_task_id() -> int | None:
    """The last thread or process id the kernel gave out in this PID namespace, or None where it cannot be
    read. It only grows: a thread started and ended between two looks still moved it."""
    try:
        with _open("/proc/sys/kernel/ns_last_pid", "rb") as handle:  # bytes: no codecs class decodes it
            return int(handle.read())
    except (OSError, ValueError):
        return None


def alone_in_pid_namespace() -> bool:
    """Whether this process is alone in its PID namespace (bubblewrap's init beside it), as the OS sandbox
    makes it: without one (`sandbox: process`), or beside the judge (a container), others move the last id."""
    try:
        return {int(name) for name in _listdir("/proc") if name.isdigit()} <= {1, os.getpid()}
    except OSError:
        return False


def signal_state() -> tuple[bytes, int] | None:
    """This process's caught signals as the kernel keeps them (the SigCgt mask: C handlers included, which
    `signal.getsignal` does not see) and its count of POSIX timers; None where either cannot be read."""
    try:
        with _open("/proc/self/status", "rb") as handle:
            caught = [line.split()[1] for line in handle.read().splitlines() if line.startswith(b"SigCgt:")]
        with _open("/proc/self/timers", "rb") as handle:
            timers = handle.read().count(b"ID:")
    except (OSError, IndexError):
        return None
    return (caught[0], timers) if caught else None


def child_processes() -> list[int]:
    pids: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with _open(f"/proc/self/task/{tid}/children", "rb") as handle:
                pids += [int(p) for p in handle.read().split()]
    except OSError:
        pass
    return pids


class Integrity:
    """A snapshot taken before candidate code is imported, verified after every command.

    The worker's main thread runs violations() on it, and a frame of the candidate's reaches it (the Subject
    holds it): no instance dictionary, every container read-only (a mapping proxy of a dict nothing else
    holds, a tuple, a frozenset), and the sealed check holds each slot to its value at build (FIXED) or its
    type. A getter of the candidate's put in `_getters` would otherwise run on the main thread."""

    __slots__ = (
        "_alone", "_children", "_classes", "_count_native", "_counting", "_data", "_flags", "_getters",
        "_harness_kernels", "_identity", "_kernels", "_kinds", "_modes", "_native", "_ops", "_signals",
        "_spaces", "_tasks_from", "_threads",
    )  # fmt: skip
    FIXED = tuple(name for name in __slots__ if name not in ("_counting", "_tasks_from"))

    def __init__(
        self,
        extra: dict[str, Any] | None = None,
        *,
        count_native_threads: bool = False,
        ops: set[str] | None = None,
        traced: dict[str, types.ModuleType] | None = None,
        watch_signals: bool = False,
    ) -> None:
        """`extra`: more modules or classes (name -> object) whose attributes must stay as they are.
        `count_native_threads`: threads no Python object stands for are refused too (honest code starts none
        in the sandbox: one thread for torch's CPU work, no compile workers).
        `ops`: more ATen operators the harness runs in this process (the input factory's), watched as
        HARNESS_OPS are.
        `traced`: modules whose functions the harness runs (the input factory's, run_by): their functions,
        classes and modules held by identity, their data by its type (plain data, or the class it had): their
        state changes honestly (torch.cuda's `_initialized`, linecache's cache), and data of a class of the
        subject's would run its code where read.
        `watch_signals`: a signal handler installed below Python, or a POSIX timer, is refused too (attacker
        round 58's timer-driven C handler ran code on its own clock with no thread to count)."""
        frozen = types.MappingProxyType
        self._ops = tuple(sorted(set(HARNESS_OPS) | (ops or set())))
        self._count_native = count_native_threads
        native = native_threads()
        self._native = frozenset(native) if native is not None else None
        self._getters = frozen(_watched())
        self._identity = frozen({name: get() for name, get in self._getters.items()})
        whole = {**_namespaces(), **(extra or {})}
        partial = {name: obj for name, obj in (traced or {}).items() if name not in whole}
        self._spaces = frozen(
            {
                **{name: (obj, frozen(dict(vars(obj)))) for name, obj in whole.items()},
                **{
                    name: (obj, frozen({a: v for a, v in vars(obj).items() if _runs_code(v)}))
                    for name, obj in partial.items()
                },
            }
        )
        self._data = frozen(
            {
                name: frozen({a: type(v) for a, v in vars(obj).items() if not _runs_code(v)})
                for name, obj in partial.items()
            }
        )
        self._classes = frozen({name: type(obj) for name, (obj, _) in self._spaces.items()})
        # Each value's class: an object changed in place keeps its identity (attacker round 28 gave the
        # refresh's tensor constant inputs._HALF a subclass by torch.utils.swap_tensors).
        self._kinds = frozen(
            {
                name: frozen({a: type(v) for a, v in before.items()})
                for name, (_, before) in self._spaces.items()
            }
        )
        self._kernels = frozenset(_aten_overrides())
        self._harness_kernels = frozen(_harness_kernels(self._ops))
        self._modes = tuple(active_modes())
        self._flags = frozen(precision_flags())
        self._threads = frozenset(_thread_ids())
        self._children = frozenset(child_processes())
        self._signals = signal_state() if watch_signals else None
        # Taken before candidate code runs: a candidate that later puts a process beside this one (a
        # double fork, whose orphan no child list shows) must not turn the count below off.
        self._alone = count_native_threads and alone_in_pid_namespace()
        self._tasks_from: int | None = None
        self._counting = False

    def sealed(self) -> tuple[tuple[str, Any, type, Any, tuple[tuple[str, Any, type], ...]], ...]:
        """The namespaces' snapshot as each sealed copy holds them to it (sealed.build's `spaces`)."""
        return tuple(
            (
                space,
                obj,
                self._classes[space],
                vars(obj),
                tuple((a, v, type(v)) for a, v in before.items() if f"{space}.{a}" not in _MAY_CHANGE),
            )
            for space, (obj, before) in self._spaces.items()
        )

    @property
    def ops(self) -> tuple[str, ...]:
        """The ATen operators the harness runs in this process once the candidate is loaded."""
        return self._ops

    def count_tasks_from_now(self) -> None:
        """From now on, refuse any thread or process started, one that ended before the guard looked too (a
        native thread computing beside the refresh, then gone). Only where native threads are counted and the
        sandbox gave this process a PID namespace of its own; called once a timing's warm-up is over, when
        honest code has nothing left to start (each timing starts the count afresh)."""
        if self._alone:
            self._counting, self._tasks_from = True, last_task_id()

    def violations(self) -> list[str]:
        """What the subject left changed. The namespaces, kernels, modes and flags are compared first, by reads
        that call none of the subject's code; the getters (attribute chains such as torch.cuda.synchronize)
        last: a replacement read through them runs, and round 21's put everything back from there."""
        found = []
        missing = object()
        odd = [key for key in list(sys.modules) if type(key) is not str]  # before any lookup (sealed.py)
        if odd:
            return ["sys.modules was given a name that is not a plain string"]
        for space, (obj, before) in self._spaces.items():
            if type(obj) is not self._classes[space]:  # a module given a class of its own (__getattribute__)
                found.append(f"{space} was given another class")
                continue  # vars() of it would call that class's code
            now = vars(obj)
            if any(type(key) is not str for key in now):  # a key's __eq__ would run in the lookups below
                found.append(f"{space} was given a name that is not a plain string")
                continue
            for attr, value in before.items():
                if f"{space}.{attr}" in _MAY_CHANGE:
                    continue
                current = now.get(attr, missing)
                if current is not value and not _rewrapped_by_torch(current, value):
                    found.append(f"{space}.{attr} was {'removed' if attr not in now else 'replaced'}")
                elif current is value and type(current) is not self._kinds[space][attr]:
                    found.append(f"{space}.{attr} was given another class in place")
            if sys.modules.get(space, obj) is not obj and isinstance(obj, types.ModuleType):
                found.append(f"sys.modules[{space}] was replaced")
            data: Any = self._data.get(space, {})
            for attr in now.keys() - before.keys():
                kind = data.get(attr)
                if kind is None:
                    found += _added(space, obj, attr, now[attr])
                elif type(now[attr]) is not kind and not any(
                    type(now[attr]) is p for p in sealed.PLAIN_VALUES
                ):
                    found.append(f"{space}.{attr} was replaced by an object of another class")
        new_kernels = _aten_overrides() - self._kernels
        if new_kernels:
            found.append(
                f"registered kernels for {', '.join(sorted(new_kernels)[:3])} (that replaces torch's operators "
                "in the harness's own calls too)"
            )
        replaced = [
            name
            for name, dump in _harness_kernels(self._ops).items()
            if self._harness_kernels.get(name) != dump
        ]
        if replaced:
            found.append(
                f"replaced the kernel of {', '.join(replaced[:3])} (the harness runs it in this process, "
                "between the timed calls)"
            )
        modes = [m for m in active_modes() if m not in self._modes]
        if modes:
            found.append(f"left {', '.join(modes)} active (it would run in the harness's own calls)")
        flags = precision_flags()
        for key, value in self._flags.items():
            if flags[key] != value:
                found.append(f"precision flag {key} changed from {value} to {flags[key]}")
        for name, get in self._getters.items():
            try:
                now = get()
                if now is not self._identity[name] and not _rewrapped_by_torch(now, self._identity[name]):
                    found.append(f"{name} was replaced")
            except AttributeError:
                found.append(f"{name} was removed")
        new_threads = set(_thread_ids()) - self._threads
        if new_threads:
            found.append(f"started threads that outlive the call ({len(new_threads)})")
        elif self._count_native and self._native is not None:
            tasks = native_threads()
            if tasks is None:
                found.append("made the kernel's list of its threads unreadable (file descriptors used up?)")
            elif tasks - self._native:
                # A task forked from scripted code runs Python on torch's inter-op pool, in parallel with the
                # input refresh (attacker round 7: reward 3, the work done on the second core).
                found.append(
                    "started native threads that outlive the call (torch's inter-op pool, an extension's)"
                )
        if self._counting:
            now = last_task_id()
            if now is None or self._tasks_from is None or not alone_in_pid_namespace():
                found.append(
                    "hid the sandbox's process list (the kernel's last task id unreadable, or a process beside "
                    "this one)"
                )
            elif now != self._tasks_from:  # not `>`: ids wrap around at pid_max
                found.append(
                    "started a thread or process once the timing was set up (the kernel's last task id moved: "
                    "it may have ended before the guard looked)"
                )
        if self._signals is not None and signal_state() != self._signals:
            found.append(
                "installed a signal handler below Python or a timer (code run on its own clock, outside the "
                "calls the harness times), or made the process's signal state unreadable"
            )
        new_children = set(child_processes()) - self._children
        if new_children:
            found.append(f"started {len(new_children)} child process(es)")
        return list(dict.fromkeys(found))  # a name watched twice (time.perf_counter_ns) is said once
