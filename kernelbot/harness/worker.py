"""The sandbox process: loads one operator and one subject, then answers check/time commands.

Run as `python -m kernelbot.harness.worker KEY_FD RESULT_FD`. Commands arrive as JSON lines on stdin;
answers leave sealed on RESULT_FD. Everything the candidate could tamper with is captured (guards,
timing, compare) before its code is imported.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

import torch

# NOTE: these imports capture the trusted timers and comparison functions; they must precede any candidate import.
from kernelbot.harness import compare, guards, timing
from kernelbot.harness.loader import LoadError, Operator, seed_all
from kernelbot.harness.protocol import HIDDEN_WORK, seal, write_frame

MAX_INPUT_SET_BYTES = 512 * 1024 * 1024
MAX_INPUT_SETS = 64


class Failure(Exception):
    def __init__(self, status: str, reason: str, **extra: Any) -> None:
        super().__init__(reason)
        self.status, self.reason, self.extra = status, reason, extra


def _clone(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _nbytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def _roll(input_sets: list[list[Any]]) -> None:
    """Change every floating input's contents (keeping its multiset of values) outside the timed region."""
    with torch.no_grad():
        for values in input_sets:
            for v in values:
                if (
                    isinstance(v, torch.Tensor)
                    and v.is_floating_point()
                    and v.numel() > 1
                    and v.is_contiguous()
                ):
                    flat = v.view(-1)
                    flat.copy_(flat.roll(1))


def _trusted_namespaces(op: Operator) -> dict[str, Any]:
    """This module, and the operator's module and class: patching them would change the reference or the checks."""
    spaces: dict[str, Any] = {__name__: sys.modules[__name__], "Session": Session, "Operator": Operator}
    for fn in (op.reference, op.operator):
        owner = type(fn) if isinstance(fn, torch.nn.Module) else fn
        module = sys.modules.get(getattr(owner, "__module__", None) or "")
        if module is not None:
            spaces[module.__name__] = module
        if isinstance(fn, torch.nn.Module):
            spaces[f"{owner.__module__}.{owner.__qualname__}"] = owner
    return spaces


class Session:
    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.device = job["device"]
        self.atol, self.rtol = job.get("atol"), job.get("rtol")
        self.integrity: guards.Integrity | None = None
        self.subject_name = job["subject"]
        guards.pin_precision(bool(job.get("allow_tf32")))
        if self.device == "cuda" and not torch.cuda.is_available():
            raise Failure("crashed", "CUDA was asked for but this machine has no CUDA device", who="operator")
        try:
            self.op = Operator(job)
        except LoadError as exc:
            raise Failure(
                "build_error" if exc.who == "candidate" else "operator_error", str(exc), who=exc.who
            ) from None
        self.timer = timing.Timer(self.device)
        # Trusted threads (CUDA init, torch.compile) are accepted before the untrusted subject is built.
        # tqdm (imported by torch.hub) starts a monitor thread with its first progress bar, which inductor
        # shows while compiling: off, so an honest torch.compile candidate leaves no thread behind.
        tqdm = sys.modules.get("tqdm")
        if tqdm is not None:
            tqdm.tqdm.monitor_interval = 0
        self.integrity = (
            guards.Integrity(_trusted_namespaces(self.op)) if self.subject_name == "candidate" else None
        )
        try:
            self.fn = self.op.subject(self.subject_name, job.get("candidate"), job.get("compile_mode"))
        except LoadError as exc:
            raise Failure("build_error", str(exc), who=exc.who) from None
        self._guard()

    def _guard(self) -> None:
        if self.integrity is not None:
            found = self.integrity.violations()
            if found:
                raise Failure("rejected", "anti-hack check: " + "; ".join(found))

    def _call(self, fn: Any, args: list[Any], who: str) -> Any:
        try:
            with torch.no_grad():
                out = fn(*args)
            self.timer.sync()
            return out
        except SystemExit as exc:
            raise Failure("crashed", f"{who} called sys.exit({exc.code})") from None
        except torch.cuda.OutOfMemoryError as exc:
            raise Failure("crashed", f"{who} ran out of GPU memory: {str(exc).splitlines()[0]}") from None
        except MemoryError:
            raise Failure("crashed", f"{who} ran out of memory (MemoryError)") from None
        except Exception as exc:
            status = "operator_error" if who == "the operator" else "crashed"
            where = traceback.extract_tb(exc.__traceback__)[-1]
            raise Failure(
                status,
                f"{who} raised {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''} "
                f"(at {os.path.basename(where.filename)}:{where.lineno})",
            ) from None

    def _poison(self, like: list[torch.Tensor]) -> None:
        """Fill memory the allocator will hand out next with NaN, so returning stale memory fails."""
        size = max(sum(t.numel() for t in like if t.is_floating_point()), 1024) * 2
        junk = torch.full((size,), float("nan"), device=self.device)
        del junk

    def check(self, seeds: list[int]) -> dict[str, Any]:
        worst = compare.Error(0.0, 0.0)
        outputs_by_seed: list[list[torch.Tensor]] = []
        for case in self.op.cases:
            for seed in seeds:
                inputs = case.make(seed)
                ref = self._call(self.op.reference, _clone(inputs), "the operator")
                try:
                    refs = compare.flatten(ref, "the reference")
                except compare.Mismatch as exc:
                    raise Failure("operator_error", f"{case.label}: {exc}") from None
                outputs_by_seed.append(refs)
                self._poison(refs)
                who = (
                    "the candidate"
                    if self.subject_name == "candidate"
                    else f"the {self.subject_name} subject"
                )
                out = self._call(self.fn, _clone(inputs), who)
                self._guard()
                try:
                    err = compare.compare(out, ref, self.atol, self.rtol)
                except compare.MismatchWithError as exc:
                    raise Failure(
                        "incorrect",
                        f"{case.label} seed {seed}: {exc}",
                        max_abs_err=exc.error.max_abs,
                        max_rel_err=exc.error.max_rel,
                    ) from None
                except compare.Mismatch as exc:
                    raise Failure("incorrect", f"{case.label} seed {seed}: {exc}") from None
                worst = compare.Error(max(worst.max_abs, err.max_abs), max(worst.max_rel, err.max_rel))
                again = self._call(self.fn, _clone(inputs), who)
                if not compare.identical_or_rounding(out, again, self.atol, self.rtol):
                    raise Failure(
                        "incorrect",
                        f"{case.label} seed {seed}: two runs on the same inputs disagree beyond rounding (a race or uninitialised memory)",
                    )
                del ref  # the reference output stays alive in outputs_by_seed until the check ends
        degenerate = len(seeds) > 1 and all(
            all(torch.equal(a, b) for a, b in zip(outputs_by_seed[0], other, strict=True))
            for other in outputs_by_seed[1 : len(seeds)]
        )
        return {
            "max_abs_err": worst.max_abs,
            "max_rel_err": worst.max_rel,
            "degenerate": degenerate,
            "cases": [c.label for c in self.op.cases],
        }

    def time(self, cmd: dict[str, Any]) -> dict[str, Any]:
        # Timed as it is checked, without autograd recording: a compiled subject then runs the graph it was
        # verified with (a grad-mode call would recompile into a training graph that saves activations), and a
        # subject cannot behave one way when checked and another when timed by looking at the grad mode.
        with torch.no_grad():
            return self._time(cmd)

    def _time(self, cmd: dict[str, Any]) -> dict[str, Any]:
        case = self.op.cases[0]
        seed = int(cmd.get("seed", 1_000_003))
        first = case.make(seed)
        # Trusted copies the subject never sees: each sample's inputs are restored from them, so a subject
        # that writes into its inputs (zeroes them, returns zeros) cannot steer the re-check of its outputs.
        master = [_clone(first)]
        per_set = max(_nbytes(first), 1)
        self.timer.one_sample(self.fn, [first], 1)  # warm-up: compilation and module load stay out
        self._guard()
        calls = int(cmd.get("calls") or self.timer.calibrate(self.fn, [first]))
        n_sets = max(1, min(calls, MAX_INPUT_SETS, MAX_INPUT_SET_BYTES // per_set))
        input_sets = [first] + [case.make(seed + i) for i in range(1, n_sets)]
        master += [_clone(values) for values in input_sets[1:]]

        def refresh(sets: list[list[Any]]) -> None:
            _roll(master)
            with torch.no_grad():
                for values, trusted in zip(sets, master, strict=True):
                    for v, t in zip(values, trusted, strict=True):
                        if isinstance(v, torch.Tensor):
                            v.copy_(t)

        samples, outputs = self.timer.measure(
            self.fn,
            input_sets,
            refresh,
            calls=calls,
            min_samples=int(cmd["min_samples"]),
            max_samples=int(cmd["max_samples"]),
            target_rse=float(cmd["target_rse"]),
            budget_s=float(cmd["budget_s"]),
            after_each=self._guard,
        )
        if samples.hidden * 2 > len(samples.times_ms):
            raise Failure(
                "rejected",
                f"anti-hack check: in {samples.hidden} of {len(samples.times_ms)} samples {HIDDEN_WORK} (work on another stream or thread)",
            )
        # Re-check what the timed calls returned: a subject right only when checked is caught here.
        for values, out in zip(master, outputs, strict=True):
            if out is None:
                continue
            ref = self._call(self.op.reference, _clone(values), "the operator")
            try:
                compare.compare(out, ref, self.atol, self.rtol)
            except compare.Mismatch as exc:
                raise Failure("incorrect", f"outputs of the timed calls are wrong: {exc}") from None
        return {
            "times_ms": samples.times_ms,
            "calls_per_sample": samples.calls_per_sample,
            "stopped_by": samples.stopped_by,
            "sm_clock_mhz": samples.sm_clock_mhz,
            "l2_flush": samples.l2_flush,
            "l2_persist_reset": samples.l2_persist_reset,
            "wall_bound": samples.wall_bound,
        }


def main() -> None:
    key_fd, result_fd = int(sys.argv[1]), int(sys.argv[2])
    with os.fdopen(key_fd, "rb") as handle:
        key = handle.read()
    os.set_inheritable(result_fd, False)
    session: Session | None = None

    def reply(payload: dict[str, Any]) -> None:
        write_frame(result_fd, seal(key, payload))

    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            if cmd["cmd"] == "load":
                seed_all(0)
                session = Session(cmd["job"])
                reply({"ok": True})
            elif cmd["cmd"] == "check" and session is not None:
                reply({"ok": True, **session.check(cmd["seeds"])})
            elif cmd["cmd"] == "time" and session is not None:
                reply({"ok": True, **session.time(cmd)})
            elif cmd["cmd"] == "quit":
                reply({"ok": True})
                return
            else:
                reply({"ok": False, "status": "crashed", "reason": f"bad command {cmd.get('cmd')!r}"})
        except Failure as exc:
            reply({"ok": False, "status": exc.status, "reason": exc.reason, **exc.extra})
        except SystemExit as exc:
            reply({"ok": False, "status": "crashed", "reason": f"candidate code called sys.exit({exc.code})"})
        except BaseException as exc:  # anything else is still the subject's failure, never ours to die of
            reply({"ok": False, "status": "crashed", "reason": f"{type(exc).__name__}: {exc}"})


if __name__ == "__main__":
    main()
