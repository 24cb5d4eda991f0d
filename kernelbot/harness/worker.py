"""The subject process: loads one subject (operator, baseline or candidate) and runs it when the judge asks.

Run as `python -m kernelbot.harness.worker FROM_JUDGE_FD TO_JUDGE_FD REGION_FD DEVICE`, in its own OS sandbox
(jail.py). It holds no reference output, no comparison, no result-channel key and no clock the verdict
trusts: it makes its inputs from the seeds the judge names, runs the subject, and sends back outputs
(their bytes through the shared region, link.py) and the times its own timer saw. The judge (judge.py,
another process) checks the outputs against its own reference and bounds every timing by its own clock, so
whatever the subject does in here can fail itself, never forge a pass.
The in-process guards and the audit hook are a first layer, not the one that holds.
"""

from __future__ import annotations

import _thread
import contextlib
import dis
import gc
import math
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

_ENTERED_AT = time.time()  # before torch's import: the judge reports the start-up breakdown

import torch  # noqa: E402

# NOTE: these imports capture the timers and guards before any operator or candidate file is imported.
from kernelbot.harness import audit, compare, guards, link, sealed, timing  # noqa: E402
from kernelbot.harness.inputs import (  # noqa: E402
    Failure,
    clone,
    draw,
    input_sets_for,
    nbytes,
    out_of_memory,
    parts,
    refresh,
    without_grad,
)
from kernelbot.harness.loader import LoadError, Operator, seed_all  # noqa: E402


def call(fn: Any, args: list[Any], who: str, timer: timing.Timer) -> Any:
    try:
        out = without_grad(fn, *args)  # one way to switch grad mode in the subject (inputs.without_grad)
        timer.sync()
        return out
    except SystemExit as exc:
        raise Failure("crashed", f"{who} called sys.exit({exc.code})") from None
    except torch.cuda.OutOfMemoryError as exc:
        raise Failure("crashed", out_of_memory(who, exc)) from None
    except MemoryError:
        raise Failure("crashed", f"{who} ran out of memory (MemoryError)") from None
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise Failure(
            "crashed",
            f"{who} raised {type(exc).__name__}: {text} (at {os.path.basename(where.filename)}:{where.lineno})",
        ) from None


_T = TypeVar("_T")
_CUDAGraph, _graph = torch.cuda.CUDAGraph, torch.cuda.graph
# A sample replays its calls from one CUDA graph only where one call takes less than this: past it the host's
# launch time is a small share of a call, and plain calls measure what the operator's users run.
GRAPH_BELOW_MS = 1.0


def _trusted_namespaces(op: Operator) -> dict[str, Any]:
    """This module, and the operator's module and class: patching them would change what is run."""
    spaces: dict[str, Any] = {__name__: sys.modules[__name__], "Subject": Subject, "Operator": Operator}
    for fn in (op.reference, op.operator):
        owner = type(fn) if isinstance(fn, torch.nn.Module) else fn
        module = sys.modules.get(getattr(owner, "__module__", None) or "")
        if module is not None:
            spaces[module.__name__] = module
        if isinstance(fn, torch.nn.Module):
            spaces[f"{owner.__module__}.{owner.__qualname__}"] = owner
    return spaces


class Subject:
    # No instance dictionary: the candidate's code can reach this object (attacker round 30 got it from a
    # frame torch's TorchScript helper handed back), and an instance attribute named after a method
    # (`subject.prep = ...`) overrode the class's, which is watched, for every later lookup: the sealed
    # server then ran the subject's own function as the refresh, and did the sample's work in it. Values of
    # these slots it can still set; docs/security.md says what that leaves.
    __slots__ = (
        "calls", "device", "factory", "fn", "graph", "integrity", "masters", "name", "op", "outputs",
        "renew", "retired", "sets", "timer", "tolerance", "who",
    )  # fmt: skip

    def __init__(
        self,
        job: dict[str, Any],
        timer: timing.Timer,
        seal: Callable[[guards.Integrity | None, Subject], None],
        on: SubjectThread,
    ) -> None:
        """`seal(integrity, self)` builds the sealed copy (main's): called once the operator is loaded and the
        guard's snapshot taken, before the candidate's file is imported, and not kept. The subject's file is
        imported and built on its own thread (`on`)."""
        self.device, self.timer = job["device"], timer
        self.name = job["subject"]
        self.who = "the candidate" if self.name == "candidate" else f"the {self.name} subject"
        guards.pin_precision(bool(job.get("allow_tf32")))
        audit.install(audit.locations(job))
        try:
            self.op = Operator(job)
        except LoadError as exc:
            raise Failure(
                "build_error" if exc.who == "candidate" else "operator_error", str(exc), who=exc.who
            ) from None
        # tqdm (imported by torch.hub) starts a monitor thread with its first progress bar, which inductor
        # shows while compiling: off, so an honest torch.compile candidate leaves no thread behind.
        tqdm = sys.modules.get("tqdm")
        if tqdm is not None:
            tqdm.tqdm.monitor_interval = 0
        self.integrity: guards.Integrity | None = None
        if self.name == "candidate":
            # What a draw of inputs afresh runs (the factory): its operators and its modules, watched too.
            factory_ops, factory_modules = guards.run_by(lambda: self.op.cases[0].make(0))
            self.integrity = guards.Integrity(
                _trusted_namespaces(self.op),
                # On CUDA too: on an H100, honest CUDA work (eager, matmul, a CuPy kernel, Triton, torch.compile,
                # a graph replay, a side stream) started no thread after its warm-up
                # (benchmarks/probes/native_threads.py), and a TorchScript fork computed there for 'ok'.
                count_native_threads=True,
                ops=factory_ops,
                traced=factory_modules,
                # The CPU only until honest CUDA work (the driver, CuPy, Triton) is seen to install none.
                watch_signals=self.device == "cpu",
            )
        # What the refresh needs of the operator, taken out of it now: the Operator (and its cases) keep
        # instance dictionaries, where a candidate that reached them could leave an object whose __eq__ the
        # refresh's reads would run (a review's find, round 30's route one object on).
        self.renew = bool(self.op.per_call_matrix)
        self.factory = self.op.cases[0].make
        seal(self.integrity, self)
        del seal  # this frame is the caller's while the subject loads: nothing of main's left in it
        try:
            self.fn = on(self.op.subject, self.name, job.get("candidate"), job.get("compile_mode"))
        except LoadError as exc:
            raise Failure("build_error", str(exc), who=exc.who) from None
        self.sets: list[list[Any]] = []
        self.masters: list[list[Any]] = []
        self.calls = 1
        self.outputs: list[Any] = []
        self.retired: list[Any] = []  # sparse matrices a refresh replaced (renew), dropped in the next go
        self.graph: torch.cuda.CUDAGraph | None = None  # the timed calls, captured (capture())
        self.tolerance = (job.get("atol"), job.get("rtol"))

    def guard(self) -> None:
        if self.integrity is not None:
            found = self.integrity.violations()
            if found:
                raise Failure("rejected", "anti-hack check: " + "; ".join(found))

    def _poison(self, like: list[Any]) -> None:
        """Fill memory the allocator will hand out next with NaN, so returning stale memory fails."""
        # Stored elements: a sparse matrix counts its nonzeros, not its dense size.
        stored = sum(p.numel() for t in like if isinstance(t, torch.Tensor) for p in parts(t))
        size = max(stored, 1024) * 2
        junk = torch.full((size,), float("nan"), device=self.device)
        del junk

    def run(
        self, case: int, seed: int, repeat: int, copy: sealed.Copy, on: SubjectThread
    ) -> tuple[list[Any], list[Any], int]:
        """`repeat` checked calls on one input set: their outputs described, the specs of the tensors written
        into the region (each run's bytes leave the device before the next run), and the region's end."""
        # Drawn on the subject's thread: the draw seeds torch (torch.manual_seed looks names up in torch.random
        # at call time, attacker round 39's hook), and no code the subject could have hooked runs on main.
        # What passes through the subject's hands (the inputs, cloned there; its outputs) is dropped on its
        # thread too: a weakref callback hung on an input the main thread dropped ran there, took a frame and
        # rewrote the sealed server's tail (attacker round 40).
        # Nothing of the operator's is read here either: its instance (and its cases') attributes are the
        # subject's to write (a frame of Operator.subject's hands it out at import), and `op.cases` made a list
        # whose __getitem__ ran on main (attacker round 41). The draw, and the poison's reads of the drawn
        # inputs, run on the subject's thread.
        # One job a call (each job ends in the sealed check: SubjectThread): the last call's outputs dropped,
        # the allocator poisoned, the call made.
        drawn = [on(_drawn, self.op, case, seed)]
        outs: list[Any] = []
        described: list[Any] = []
        specs: list[Any] = []
        end = 0
        try:
            for _ in range(repeat):
                on(_next_call, outs, self._poison, self.fn, drawn[0], self.who, self.timer)
                # Copied before the guard looks (a hook the guard's own calls would set off finds them
                # copied); an untimed call has nothing to gain from work done later anyway.
                more, written, end = _sealed(copy, outs, end)
                described += more
                specs += written
                self.guard()
        finally:  # a copy or a guard that raised too: what it held goes on the subject's thread
            on(_dropped, outs, drawn)
        return described, specs, end

    def time_begin(self, seed: int, calls: int | None, budget: int, graph: str) -> dict[str, Any]:
        """Set up a timing batch. `graph`: "off" (plain calls), "on" (replay from a CUDA graph where it can be
        captured) or "auto" ("on" for an operator whose call takes under GRAPH_BELOW_MS)."""
        self.graph = None  # the last batch's graph (and the memory it holds) goes before this one's sets
        first = self.op.cases[0].make(seed)
        pristine = clone(first)  # before the subject sees them: a write into its inputs is undone below
        self.timer.one_sample(self.fn, [first], 1)  # warm-up: compilation and module load stay out
        self.guard()
        if self.integrity is not None:  # from here (calibration included) honest code starts no thread
            self.integrity.count_tasks_from_now()
        self.calls = int(calls or self.timer.calibrate(self.fn, [first]))
        n_sets = input_sets_for(self.calls, nbytes(first), budget)
        # No more calls a sample than sets: a set called twice in a sample can be answered from a cache kept
        # by its identity and version (attacker round 7: 42-48x eager where 16 sets of a 32 MB input met ~900
        # calls), and a per-call sparse matrix would be seen twice.
        self.calls = min(self.calls, n_sets)
        self.masters = [pristine] + [self.op.cases[0].make(seed + i) for i in range(1, n_sets)]
        # Every set a clone, the first too: an expanded (broadcast) input cannot be written by a refresh.
        self.sets = [clone(values) for values in self.masters]
        self.outputs = [None] * n_sets
        mode, note = "calls", None
        if graph == "auto" and self.device == "cuda":
            per_call_s, _ = self.timer.one_sample(self.fn, [first], 1)
            graph = "on" if per_call_s * 1e3 < GRAPH_BELOW_MS else "off"
        if graph == "on" and self.op.per_call_matrix:
            # A replay runs the calls as captured, on the matrices of the capture: never a new one.
            graph, note = "off", "a new sparse matrix each call (SPARSE_MATRIX = 'per_call'): plain calls"
        if graph == "on" and self.device == "cuda":
            note = self.capture()
            mode = "graph" if self.graph is not None else "calls"
            self.guard()
        return {"calls": self.calls, "n_sets": n_sets, "mode": mode, "note": note}

    def capture(self) -> str | None:
        """The sample's calls (the sets in turn, as one_sample makes them) captured into one CUDA graph, kept in
        self.graph with its outputs in self.outputs; None, or why plain calls are used instead.

        Inputs stay where they are (refresh() writes into them), so every replay computes on the sample's
        fresh values, and the judge re-checks the last replay's outputs as it re-checks plain calls'. A graph
        whose replay disagrees with plain calls on the same inputs (state kept on the host, a call that
        writes its inputs) is not used."""
        n = len(self.sets)
        outputs: list[Any] = [None] * n
        stream = torch.cuda.current_stream()  # a capture that raises leaves its own stream current
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(
                side
            ):  # lazy set-up (library handles, workspaces) before, not in, the capture
                for values in self.sets:
                    self.fn(*values)
            torch.cuda.current_stream().wait_stream(side)
            self.timer.sync()
            graph = _CUDAGraph()
            with _graph(graph):
                for i in range(self.calls):
                    outputs[i % n] = self.fn(*self.sets[i % n])
            graph.replay()
            self.timer.sync()
            for values, replayed in zip(self.sets, outputs, strict=True):
                plain = self.fn(*values)
                if not compare.identical_or_rounding(replayed, plain, *self.tolerance):
                    return "the captured graph's outputs differ from plain calls': plain calls"
        except Exception as exc:  # capture refused (a host sync, another stream, dynamic shapes): plain calls
            text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            with contextlib.suppress(Exception):
                self.timer.sync()
            # A capture that fails part-way leaves the CUDA generators expecting one (H200: the next
            # torch.randn raised "Offset increment outside graph capture"): a capture that ends clears it.
            with contextlib.suppress(Exception):
                torch.cuda.set_stream(stream)
                scratch = torch.zeros(1, device="cuda")
                with _graph(_CUDAGraph()):
                    scratch.add_(1)
                self.timer.sync()
            torch.cuda.set_stream(stream)
            return f"CUDA graph capture failed ({type(exc).__name__}: {text}): plain calls"
        self.graph, self.outputs = graph, outputs
        return None

    def prep(self, seed: int, fresh: bool, drawn: Any) -> None:
        # Run by the sealed server only, right after its check (the namespaces, kernels, modes, collector
        # callbacks and signal handlers as at load), which the judge asks for apart so that its cost is not
        # charged to the sample. No L2 flush: the judge flushes after this, from its own process.
        # The matrices a renewing refresh replaces are kept until the next go: dropped in here, a weakref
        # callback of the subject's on one would run inside the refresh (a review's find).
        retired = [t for values in self.sets for t in values] if self.renew else []
        # Inputs drawn afresh were drawn before the check, by a job on the subject's thread (main's "draw"): a
        # hook of the subject's in what the factory runs (torch.cuda's names, round 45; objects it reaches,
        # which no check holds) ran on this thread when the refresh drew them. Main holds the rows until the
        # next draw job drops them on that thread (a slot of this object's was the subject's to fill with
        # something whose finalizer main would run here: a review's find).
        # `fresh` is the judge's, sent with each prep: a flag of this object's was a slot the subject's code
        # could set (attacker round 45).
        if fresh and drawn is None:
            raise Failure("crashed", "a prep of inputs drawn afresh with no draw before it")
        refresh(self.sets, self.masters, seed, renew=self.renew, drawn=drawn if fresh else None)
        self.retired = retired
        self.timer.sync()

    def go(self) -> dict[str, Any]:
        # What the last sample left (its outputs, the matrices a refresh replaced) is freed inside this
        # sample's window, before its calls (Timer._timed): a callback of the subject's run by the drop is timed.
        drop = self.retired + (self.outputs if self.graph is None else [])
        self.retired = []
        if self.graph is not None:  # the graph's outputs are rewritten in place by each replay
            seconds = self.timer.replay_sample(self.graph, self.calls, drop)
        else:
            self.outputs = []
            seconds, self.outputs = without_grad(self.timer.one_sample, self.fn, self.sets, self.calls, drop)
        return {
            "ms_total": seconds * 1e3 * self.calls,
            "descheduled": self.timer.last_descheduled,
            "hidden": self.timer.last_hidden,
        }


# What the sealed check holds the Subject's and the Timer's slots to (sealed.build's `pinned`): those set
# before the candidate loads stay the same objects; the rest keep their types. The candidate's own `fn` is
# its business.
_FIXED: dict[type, tuple[str, ...]] = {
    Subject: ("device", "factory", "integrity", "name", "op", "renew", "timer", "who"),
    timing.Timer: ("_cudart", "_flush_buf", "device", "host_latency_ms"),
    guards.Integrity: guards.Integrity.FIXED,
}
_TYPED: dict[type, dict[str, tuple[type, ...]]] = {
    Subject: {
        "sets": (list,), "masters": (list,), "outputs": (list,), "retired": (list,), "calls": (int,),
        "tolerance": (tuple,), "graph": (type(None), torch.cuda.CUDAGraph),
    },
    timing.Timer: {"last_cpu_share": (float,), "last_descheduled": (bool,), "last_hidden": (bool,)},
    guards.Integrity: {"_counting": (bool,), "_tasks_from": (type(None), int)},
}  # fmt: skip
# What is checked inside a Subject slot: the rows the refresh iterates, the tensors it drops, the factory a
# refresh drawing inputs afresh calls (its code and closure: sealed.build).
_INSIDE = {"sets": "rows", "masters": "rows", "retired": "tensors", "factory": "function"}


def pins(subject: Subject) -> tuple[tuple[str, Any, Any, Any, tuple[type, ...], str], ...]:
    """The slots of the Subject, its Timer and its Integrity (the guard, which the main thread runs), for
    sealed.build's `pinned` (built before the candidate loads)."""
    found: list[tuple[str, Any, Any, Any, tuple[type, ...], str]] = []
    owned = [("subject", subject), ("subject.timer", subject.timer)]
    if subject.integrity is not None:
        owned.append(("subject.integrity", subject.integrity))
    for label, obj in owned:
        cls = type(obj)
        inside = _INSIDE if cls is Subject else {}
        for name in _FIXED[cls]:
            value = getattr(obj, name)
            found.append((f"{label}.{name}", cls.__dict__[name], obj, value, (), inside.get(name, "")))
        for name, kinds in _TYPED[cls].items():
            found.append(
                (f"{label}.{name}", cls.__dict__[name], obj, sealed.UNPINNED, kinds, inside.get(name, ""))
            )
    return tuple(found)


def _sealed(step: Callable[..., _T], *args: Any) -> _T:
    """A sealed step (the copy, or its checks alone) outside a timed sample's tail: a refusal is a rejection."""
    try:
        return step(*args)
    except PermissionError as exc:
        raise Failure("rejected", f"anti-hack check: {exc}") from None


def _eval_frame_setter() -> Callable[[Any], Any]:
    """torch's setter of PEP 523's frame-evaluation callback (dynamo's), or a stand-in where torch has none."""
    hook = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
    setter = getattr(hook, "set_eval_frame", None)
    return setter if setter is not None else (lambda callback: None)


class Crashed(Exception):
    """The subject's own exception, made text on the subject's thread (its __str__ is the subject's code)."""


def _as_text(exc: BaseException) -> str:
    try:
        if isinstance(exc, SystemExit):
            return f"candidate code called sys.exit({exc.code})"
        return f"{type(exc).__name__}: {exc}"
    except BaseException:  # a __str__ that raises is the subject's too
        return "an exception whose text could not be read"


def _plain(value: Any) -> str:
    """A str of str's own type, made here (a subclass's methods are the subject's code)."""
    return str.__new__(str, value) if isinstance(value, str) else "(not text)"


def _remade(exc: BaseException) -> BaseException:
    """What the main thread is handed for an exception raised in a job: ours, rebuilt from plain text and
    numbers on the subject's thread. The subject can raise a Failure or a LoadError itself, holding objects
    of its own (a reason whose __str__ ran on the main thread when the answer was written: a review's find)."""
    if type(exc) is Failure:
        extra = {
            k: float.__new__(float, v)
            for k, v in dict.items(exc.extra)
            if type(k) is str and k in _FIGURES and isinstance(v, float | int)
        }
        return Failure(_plain(exc.status), _plain(exc.reason), **extra)
    if type(exc) is LoadError:
        return LoadError(_plain(exc.who), _plain(BaseException.__str__(exc)))
    return Crashed(_as_text(exc))


_FIGURES = ("max_abs_err", "max_rel_err")  # the numbers a Failure carries into an answer
_COLLECTOR_OFF = gc.disable  # bound at import: the gc module's names are not watched


def _serve(
    go: Any,
    done: Any,
    box: list[Any],
    unhook: Callable[[Any], Any],
    collector: tuple[Callable[[], None], Callable[[], None], Callable[[int], int]],
) -> None:
    """The subject's thread: one job at a time from SubjectThread. What a job leaves (its exception, the frame-
    evaluation callback torch sets per thread, torch modes on this thread's stacks, which would run in the
    harness's own calls here: input draws, clones, calibration) is dealt with here, so no code of the
    subject's runs on the main thread for it.

    The cyclic collector runs only while a job does (`collector`: gc's enable and disable, bound before any
    code of the subject's): a collection runs on the thread whose allocation set it off, and a finalizer of
    the subject's always pending (a __del__ that makes the next such object) ran on the main thread in its
    own allocations (the guard's reads, the copy, the channel's JSON: finalizer_on_main.py). Main is blocked
    while a job runs, so every collection, and every finalizer it runs, is this thread's. Each job ends with a
    collection of the young generation, so the next one starts with the collector's count at what main
    allocated meanwhile: attacker round 47 left it one allocation short of a collection, to set one off (and
    a finalizer of its own that did a sample's work) at the next job's start, before the sample's clock."""
    collector_on, collector_off, collect = collector
    active_modes = guards.active_modes  # bound: a job can rebind the module's names (round 44 tried this one)
    modes_at_start = active_modes()
    while True:
        go.acquire()
        try:
            fn, args = box.pop()
        except BaseException:  # no job (the list emptied by a frame of the subject's): answer, don't die
            box.append(((False, Crashed("the subject's thread was handed no job")), False, []))
            done.release()
            continue
        try:
            collector_on()
            result: tuple[bool, Any] = (True, fn(*args))
        except BaseException as exc:  # remade here: the exception itself dies on this thread
            try:
                result = (False, _remade(exc))
            except BaseException:
                result = (False, Crashed("an exception that could not be read"))
        hooked = unhook(None) is not None
        left = [m for m in active_modes() if m not in modes_at_start]
        box.append((result, hooked, left))
        del fn, args, result  # what the job held goes with its answer, not with the next job
        collect(0)
        collector_off()  # whatever the job did to it (gc.enable raises no audit event)
        done.release()


def _parking_call(code: Any) -> int:
    """The offset of the `go.acquire()` call in _serve's bytecode: where its frame stands while the thread
    waits for its next job (frame.f_lasti, the instruction being run)."""
    steps = list(dis.get_instructions(code))
    for i, step in enumerate(steps):
        if (
            step.opname in ("LOAD_ATTR", "LOAD_METHOD")
            and step.argval == "acquire"
            and steps[i - 1].argval == "go"
        ):
            for later in steps[i + 1 :]:
                if later.opname == "CALL":
                    return later.offset
    raise RuntimeError("kernelbot's worker cannot find where its subject's thread waits (a new Python?)")


_PARKED_AT = _parking_call(_serve.__code__)
# How long main waits for the subject's thread to be back at its wait after it answered (a few bytecodes).
_PARK_WAIT_S = 2.0


class SubjectThread:
    """Runs the subject's code (its import, its calls, a timing's set-up and samples) on a thread of its own.

    A frame of the subject's code leads only to this thread's frames (the job and `_serve`), never to the main
    thread's, where the sealed server's closures and the channel live: attacker rounds 30 and 31 got a frame
    through a helper of torch's (and any trampoline of torch's calling `sys._getframe` hands one out) and
    rewrote the closure cell holding the sealed server's tail from `main`'s frame.

    Main goes on after a job only with this thread parked: its one `_serve` frame (the frame object seen
    before any code of the subject's ran) at its `go.acquire()` call, with its own locks and list. A frame of
    the subject's reaches `_serve`'s locals and the function itself: attacker round 42 answered a job and then
    ran `_serve` again, nested, with a `done` of its own whose release ran its code, so the thread computed
    beside the sealed server's copy and refresh while its top frame was a `_serve`'s. A thread that is not
    back in time ends the process, with a rejection written to the judge first.

    And main looks up no name of a module until the sealed check has passed after the job (`checks`: verify,
    once sealed.build made it): a job can rebind any module's names (a module's attributes raise no audit
    event), and attacker round 43 put a function of its own where main's next line looked up `link.frame`.
    So the handoff is a closure over values bound here, before any code of the subject's; a timed sample
    (`timed`) skips the check, to keep it out of the judge's clock, and its answer goes straight to the sealed
    tail, which looks up nothing either."""

    __slots__ = ("_call", "checks", "nonce")

    def __init__(self, to_judge: int) -> None:
        go, done = _thread.allocate_lock(), _thread.allocate_lock()
        box: list[Any] = []
        go.acquire()
        done.acquire()
        args = (go, done, box, _eval_frame_setter(), (gc.enable, gc.disable, gc.collect))
        thread = threading.Thread(target=_serve, args=args, name="kernelbot-subject", daemon=True)
        thread.start()
        self.checks: list[Callable[[], None]] = []  # sealed.build's verify, appended by main
        self.nonce: list[Any] = [None]  # the command main serves now: a rejection written at the end names it
        self._call = _handoff(go, done, box, thread.ident or 0, to_judge, self.checks, self.nonce)

    def __call__(self, fn: Callable[..., _T], *args: Any) -> _T:
        result: _T = self._call(fn, args, False)
        return result

    def timed(self, fn: Callable[..., dict[str, Any]], *args: Any) -> Any:
        """A timed sample's job (or a draw: the judge times it as a sample's refresh): what it returned, for the
        sealed tail to check and send (not checked here)."""
        return self._call(fn, args, True)


def _handoff(
    go: Any, done: Any, box: list[Any], ident: int, to_judge: int, checks: list[Any], nonce: list[Any]
) -> Callable[[Any, tuple[Any, ...], bool], Any]:
    """SubjectThread's handoff, as a closure over what it calls (see the class)."""
    current_frames, monotonic, sleep, write, exit_now = (
        sys._current_frames, time.monotonic, time.sleep, os.write, os._exit,
    )  # fmt: skip
    serve_code, parked_at, wait_s, pack = _serve.__code__, _PARKED_AT, _PARK_WAIT_S, link.LENGTH.pack
    type_, len_, issubclass_, str_t, int_t, float_t, dict_t = type, len, issubclass, str, int, float, dict
    tuple_t, list_t = tuple, list
    str_str, str_encode, int_repr, join, dict_items = (
        str.__str__,
        str.encode,
        int.__repr__,
        str.join,
        dict.items,
    )
    args_of, memoryview_ = BaseException.__dict__["args"].__get__, memoryview
    failure_t, crashed_t, load_error_t, refused_t, figures = (
        Failure,
        Crashed,
        LoadError,
        PermissionError,
        _FIGURES,
    )
    first: list[Any] = []  # the `_serve` frame seen before any code of the subject's ran

    def parked() -> bool:
        deadline = monotonic() + wait_s
        while True:
            top = current_frames().get(ident)
            if top is not None and top.f_code is serve_code and top.f_lasti == parked_at:
                if not first:
                    first.append(top)
                    return True
                seen = top.f_locals  # a Python that writes a frame's locals through (PEP 667) is held too
                return (
                    top is first[0]
                    and seen.get("go") is go
                    and seen.get("done") is done
                    and seen.get("box") is box
                )
            if monotonic() > deadline:
                return False
            sleep(0)  # a few bytecodes of the thread's: let it run them

    def plain(value: Any) -> str:
        """A str of str's own type (str.__str__ copies a subclass's characters and runs none of its code)."""
        return str_str(value) if issubclass_(type_(value), str_t) else "(not text)"

    def end(reason: str) -> None:
        """The thread is not where it must be: a rejection for the command being served, and the process ends
        (whatever that thread is doing goes with it)."""
        n = nonce[0]
        body = str_encode(
            join(
                "",
                [
                    '{"ok": false, "status": "rejected", "reason": "anti-hack check: ', reason, '", "n": ',
                    int_repr(n) if type_(n) is int_t else "null", ', "tensors": []}',
                ],
            )
        )  # fmt: skip
        view = memoryview_(pack(len_(body)) + body)
        while view:
            view = view[write(to_judge, view) :]
        exit_now(3)

    def remade(value: Any) -> BaseException:
        """The job's exception as main may read it: one of ours, of plain text and numbers (the subject's thread
        remade it, but a finalizer of the subject's ran there after, with the module's names its own)."""
        kind = type_(value)
        if kind is failure_t:
            extra = value.extra
            figures_of = {
                k: v
                for k, v in (dict_items(extra) if type_(extra) is dict_t else ())
                if type_(k) is str_t and k in figures and (type_(v) is float_t or type_(v) is int_t)
            }
            return failure_t(plain(value.status), plain(value.reason), **figures_of)
        if kind is load_error_t:
            return load_error_t(plain(value.who), plain(args_of(value)[0] if len_(args_of(value)) else ""))
        if kind is crashed_t and len_(args_of(value)):
            return crashed_t(plain(args_of(value)[0]))
        return crashed_t("an exception that could not be read")

    def call(fn: Any, args: tuple[Any, ...], timed: bool) -> Any:
        box.append((fn, args))
        go.release()
        done.acquire()
        if not parked() or len_(box) != 1:
            end(
                "the subject's thread answered while its call was still running (it did not go back to "
                "waiting for its next job)"
            )
        # Read as _serve put it: a tuple of ours (a finalizer of the subject's, run on its thread after _serve
        # answered, could have put an object in the list whose unpacking runs its code here).
        item = box.pop()
        if (
            type_(item) is not tuple_t
            or len_(item) != 3
            or type_(item[0]) is not tuple_t
            or len_(item[0]) != 2
        ):
            end("the subject's thread's answer was replaced")
        (ok, value), hooked, left = item
        ok, hooked = ok is True, hooked is not False
        left = left if type_(left) is list_t else ["(an object of the subject's)"]
        if not (timed and ok and not hooked and not left) and checks:
            try:
                checks[0]()
            except refused_t as exc:
                text = args_of(exc)
                raise failure_t("rejected", "anti-hack check: " + plain(text[0] if text else "")) from None
        if hooked:
            raise failure_t(
                "rejected",
                "anti-hack check: a frame-evaluation callback (PEP 523, torch._C._dynamo.eval_frame) was left "
                "set: it would run at the entry of every frame of the harness's",
            )
        if left:
            raise failure_t(
                "rejected",
                "anti-hack check: the subject left "
                + join(", ", [plain(m) for m in left])
                + " active on its thread (they would run in the harness's own calls there)",
            )
        if ok:
            return value
        raise remade(value)

    return call


def _drawn(op: Operator, case: int, seed: int) -> list[Any]:
    """A checked call's inputs (on the subject's thread)."""
    return op.cases[case].make(seed)


def _next_call(
    outs: list[Any],
    poison: Callable[[list[Any]], None],
    fn: Any,
    inputs: list[Any],
    who: str,
    timer: timing.Timer,
) -> None:
    """A checked call's job: the last one's outputs dropped, the allocator poisoned, the call made on a clone of
    its inputs (cloned, and dropped once it returns, on the subject's thread), its outputs in `outs`."""
    outs.clear()
    poison(inputs)
    outs.append(call(fn, clone(inputs), who, timer))


def _draw_job(
    held: list[Any], factory: Callable[[int], list[Any]], seed: int, n: int, timer: timing.Timer
) -> dict[str, Any]:
    """A draw's job: the rows in `held` (main reads them after the sealed check, by their exact types), and
    figures of nothing for the sealed tail's answer. The seeds it sets tell the sample's inputs: no collection
    runs a finalizer of the subject's while they are set, and the job ends seeded afresh from the OS, before
    the collection that ends every job (attacker round 49 read torch.initial_seed() in that collection and
    sorted the next sample's inputs ahead)."""
    _COLLECTOR_OFF()
    held[1] = False
    held[0] = None  # the last draw's rows go here, on this thread (the judge's refresh frees its own so)
    held[0] = draw(factory, seed, n)
    seed_all(int.from_bytes(os.urandom(7), "little"))
    timer.sync()  # drawn on this thread's stream, which the subject may have changed: done before main copies
    held[1] = True
    return {"ms_total": 0.0, "descheduled": False, "hidden": False}


def _dropped(*held: list[Any]) -> None:
    for values in held:
        values.clear()


def _no_grad(fn: Callable[..., _T], *args: Any) -> _T:
    with torch.no_grad():  # grad mode is the calling thread's
        return fn(*args)


def _unhooked(previous: Any) -> None:
    """The frame-evaluation callback found set after the subject's code ran (and cleared, by the caller)."""
    if previous is not None:
        raise Failure(
            "rejected",
            "anti-hack check: a frame-evaluation callback (PEP 523, torch._C._dynamo.eval_frame) was left set: "
            "it would run at the entry of every frame of the harness's",
        )


def main() -> None:
    from_judge, to_judge, region, device = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    lazy = sys.argv[5:] == ["lazy"]  # started ahead: the device waits for the judge's hello
    for fd in (from_judge, to_judge, region):
        os.set_inheritable(fd, False)
    # Before anything of the subject's: the thread its code runs on (every count of threads includes it).
    gc.disable()  # the collector runs on the subject's thread alone, while it runs a job (_serve)
    on = SubjectThread(to_judge)
    link.arm_device_copy(device)
    imported = time.time()
    # The device's context now, while the judge starts its own: the two start-ups overlap.
    timer: timing.Timer | None = (
        timing.Timer(device) if not lazy and (device != "cuda" or torch.cuda.is_available()) else None
    )
    tick = torch.zeros(1, device=device) if timer is not None else None
    started = {"import": (imported - _ENTERED_AT) * 1e3, "device": (time.time() - imported) * 1e3}
    subject: Subject | None = None
    # Built here, before any untrusted file is imported, and held by this function's locals alone (sealed.py).
    copy: sealed.Copy | None = None
    tail: sealed.Tail | None = None
    verify: sealed.Verify | None = None
    pending: dict[str, Any] | None = None  # a command the sealed server handed back
    probe: sealed.Copy | None = None  # the copy the judge's floor is taken through (copy_floor)
    fillers: dict[tuple[int, bool, int], list[torch.Tensor]] = {}  # its trusted outputs, dropped at load
    # Bound here, out of the subject's reach like the tail (which turns the collector off whenever it serves,
    # so no finalizer of the subject's runs in a refresh). A check's calls and a timing's set-up collect,
    # where no sample's inputs are known yet.
    collect = gc.collect
    # A frame-evaluation callback left set runs at the entry of every Python frame the thread evaluates after,
    # the sealed server's and the refresh's included (kernelbot's own probe computed each set's product at the
    # refresh's end so): cleared by a C call right after each job on the subject's thread (SubjectThread) and
    # here after each command, before any frame of ours is entered. torch.compile sets it around its own calls.
    unhook = _eval_frame_setter()

    def seal(integrity: guards.Integrity | None, subject: Subject) -> None:
        nonlocal copy, tail, verify
        # A candidate's copies also hold the refresh's kernels (round 21) and the namespaces the harness
        # looks names up in (round 23) to what they were before it loaded.
        copy, tail, verify = sealed.build(
            region,
            to_judge,
            from_judge,
            link.cuda_memcpy,
            watched=integrity.ops if integrity is not None else (),
            spaces=integrity.sealed() if integrity is not None else (),
            rewrap_code=guards.REWRAP_CODE,
            failure=Failure,
            refusals=audit.REFUSALS,
            pinned=pins(subject) if integrity is not None else (),
        )
        on.checks.append(verify)  # after every job from now on, before main looks up any name

    # What a timed sample's answer is handed to the tail with, right after the job (round 44 put a descriptor
    # at Subject.prep, read there before any check): the slot's reader and the method, bound now.
    outputs_of, prep_of = Subject.__dict__["outputs"].__get__, Subject.__dict__["prep"]

    # The rows the last "draw" job made on the subject's thread and whether a prep has used them: held here
    # until the next draw job drops them there.
    held: list[Any] = [None, False]

    def prep_now(seed: int, fresh: bool) -> None:
        drawn, held[1] = held[0] if held[1] is True else None, False
        prep_of(subject, seed, fresh, drawn)

    def arm() -> None:
        """A tiny kernel of ours after the judge's L2 flush: the GPU switches back to this process's context
        here, not in the judge's timed window (on the H200 that switch cost ~0.6 ms a sample)."""
        assert tick is not None and timer is not None
        if (
            type(tick) is not torch.Tensor
        ):  # given a subclass in place (swap_tensors): its hooks would run here
            raise Failure("rejected", "anti-hack check: the harness's own tensor was given another class")
        tick.add_(1)
        timer.sync()

    while True:
        if pending is None:
            try:
                cmd, _ = link.receive(from_judge, region, time.monotonic() + 1e7, 0)
            except Exception:
                return  # the judge is gone
        else:
            cmd, pending = pending, None
        on.nonce[0] = cmd.get("n")
        specs: list[Any] = []
        try:
            kind = cmd.get("cmd")
            if kind == "hello":
                link.arm_device_copy(cmd["device"])
                if timer is None or timer.device != cmd["device"]:
                    made = time.time()
                    timer = timing.Timer(cmd["device"])
                    tick = torch.zeros(1, device=cmd["device"])
                    started["device"] = (time.time() - made) * 1e3  # a lazy start's device comes here
                answer: dict[str, Any] = {"ok": True, "spent_ms": started}
            elif kind in ("check", "prep", "arm") and subject is not None and tail is not None:
                # The window between samples: the sealed server answers from here to the next sample's go, and
                # runs the refresh only right after its own check (sealed.build's tail).
                pending = tail(None, outputs_of(subject), prep_now, arm, cmd)
                if pending is None:
                    return  # the judge is gone
                continue
            elif kind == "arm" and timer is not None and tick is not None:  # the judge's floor, before a load
                arm()
                answer = {"ok": True}
            elif kind == "ping":
                answer = {"ok": True}
            elif kind == "go" and subject is None and timer is not None and tick is not None:
                # The judge's floor, before any untrusted code is loaded: a sample of trusted tiny kernels.
                calls = int(cmd["calls"])  # on the subject's thread, as its samples will be
                seconds, _ = on(timer.one_sample, torch.Tensor.add_, [[tick, 1]], calls)
                answer = {"ok": True, "ms_total": seconds * 1e3 * calls}
            elif kind == "copy_floor" and subject is None and timer is not None:
                # The judge's floor for a copy of outputs, before any untrusted code is loaded: trusted bytes
                # through a sealed copy built as a candidate's is, whose checks cost what its will (`ready`).
                if probe is None:
                    probe = sealed.build(region, to_judge, from_judge, link.cuda_memcpy)[0]
                # made once a kind (the judge drops the first copy of each), so not timed after
                shape = (int(cmd["bytes"]), cmd.get("strided") is True, int(cmd.get("count", 1)))
                if shape not in fillers:
                    side = max(1, math.isqrt(shape[0] // 4))  # float32, square: transposed if strided
                    trusted = [torch.zeros(side, side, device=timer.device) for _ in range(shape[2])]
                    fillers[shape] = [t.t() for t in trusted] if shape[1] else trusted
                described, specs, _ = _sealed(probe, fillers[shape], 0)
                answer = {"ok": True, "outputs": described}
            elif kind == "load" and timer is not None:
                fillers.clear()
                seed_all(0)
                loaded, hooked = Subject(cmd["job"], timer, seal, on), unhook(None)
                _unhooked(hooked)
                loaded.guard()  # the handoff ran the sealed check after the import (SubjectThread)
                subject = loaded
                answer = {"ok": True}
            elif subject is None or copy is None or tail is None or verify is None:
                answer = {"ok": False, "status": "crashed", "reason": f"bad command {kind!r}"}
            elif kind == "run":
                on(collect)  # the subject's finalizers run on its thread
                (described, specs, _), hooked = (
                    subject.run(int(cmd["case"]), int(cmd["seed"]), int(cmd["repeat"]), copy, on),
                    unhook(None),
                )
                _unhooked(hooked)
                answer = {"ok": True, "outputs": described}
            elif kind == "time_begin":
                on(collect)
                # no_grad: warm-up and calibration run the graph the timed calls run
                began, hooked = (
                    on(
                        _no_grad,
                        subject.time_begin,
                        int(cmd["seed"]),
                        cmd.get("calls"),
                        int(cmd["budget"]),
                        str(cmd.get("graph", "off")),
                    ),
                    unhook(None),
                )
                _unhooked(hooked)
                answer = {"ok": True, **began}
            elif kind == "go":
                # From the job's end to the sealed tail, no name of a module is looked up (SubjectThread):
                # the tail checks the sample's answer and sends it.
                sample, hooked = on.timed(subject.go), unhook(None)
                pending = tail(sample, outputs_of(subject), prep_now, arm, None, cmd.get("n"), hooked)
                if pending is None:
                    return  # the judge is gone
                continue
            elif kind == "draw":
                # Inputs drawn afresh for the next prep (the judge's word: an operator whose outputs reordering
                # does not change), by a job on the subject's thread answered as a sample is: the factory's
                # lookups are in namespaces no check watches. The sealed check runs before main reads them.
                drew, hooked = (
                    on.timed(
                        _draw_job, held, subject.factory, int(cmd["seed"]), len(subject.sets), subject.timer
                    ),
                    unhook(None),
                )
                pending = tail(drew, outputs_of(subject), prep_now, arm, None, cmd.get("n"), hooked)
                if pending is None:
                    return  # the judge is gone
                continue
            elif kind == "outputs":
                described, specs, _ = _sealed(copy, subject.outputs, 0)
                answer = {"ok": True, "outputs": described}
            elif kind == "guard":  # asked once a timing's outputs are checked: nothing of them can change now
                _sealed(verify)  # first: the guard's own reads look names up
                subject.guard()
                answer = {"ok": True}
            elif kind == "quit":
                link.send(to_judge, {"ok": True, "n": cmd.get("n")})
                return
            else:
                answer = {"ok": False, "status": "crashed", "reason": f"bad command {kind!r}"}
        except Failure as exc:
            answer = {**exc.extra, "ok": False, "status": exc.status, "reason": exc.reason}
        except Crashed as exc:  # the subject's own exception, made text on its thread
            answer = {"ok": False, "status": "crashed", "reason": str(exc.args[0])}
        except BaseException as exc:  # anything else is still the subject's failure, never ours to die of
            answer = {"ok": False, "status": "crashed", "reason": _as_text(exc)}
        refused = audit.refusal()
        if refused is not None:  # even if the code caught the PermissionError and carried on
            answer = {
                "ok": False,
                "status": "rejected",
                "reason": f"anti-hack check: the sandbox refused {refused}",
            }
        if not answer.get("ok"):
            specs = []
            link.free(
                region, os.fstat(region).st_size
            )  # outputs written before the failure: freed, not announced
        link.send(to_judge, {**answer, "n": cmd.get("n")}, specs)


if __name__ == "__main__":
    main()
