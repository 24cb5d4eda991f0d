"""The judge process: the reference, the comparison, the clock the verdict trusts, and the result channel.

Run as `python -m kernelbot.harness.judge KEY_FD RESULT_FD TO_SUBJECT_FD FROM_SUBJECT_FD REGION_FD DEVICE`, in its own OS
sandbox, beside a subject process (worker.py) in another one. Commands from the parent arrive as JSON lines on
stdin; answers leave sealed with the channel key on RESULT_FD. The subject never shares this process: it
cannot read the key, patch the reference or the comparison, or reach this process's memory. What it sends
is data: outputs are compared here against a reference computed here, and each timing sample is bounded by
this process's own clock around the subject's work (`bound`): a subject that lies about its times gains at
most the tolerance in TOLERANCE (docs/security.md says what that leaves).

Why one module of ~600 lines: it is the whole of what the subject must not reach, so that an audit of the
trust boundary reads one file; the parts that need no secrecy (comparison, inputs, timing statistics, the
link) live in their own modules.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import json
import math
import os
import secrets
import sys
import time
from collections.abc import Iterator
from typing import Any

_ENTERED_AT = time.time()  # before torch's import: the start-up breakdown (Judge.spent) counts it

import torch  # noqa: E402

# NOTE: captured before the operator's (untrusted) file is imported.
from kernelbot.harness import audit, compare, guards, link, timing  # noqa: E402
from kernelbot.harness.inputs import (  # noqa: E402
    Failure,
    clone,
    draw,
    input_sets_for,
    nbytes,
    out_of_memory,
    refresh,
    same_tensor,
    set_bytes_budget,
)
from kernelbot.harness.loader import LoadError, Operator, seed_all  # noqa: E402
from kernelbot.harness.protocol import HIDDEN_WORK, seal, write_frame  # noqa: E402

_ns = time.perf_counter_ns
# The judge's clock bounds what the subject claims for a batch of samples (see `bound`): the median of how
# far its go-to-answer time exceeds the claim, beyond an honest sample's overhead (its floor), may reach this
# (factor of the claim, milliseconds) before the excess counts. Medians, because the verdict works on
# medians and the judge's clock jitters by more than a short sample's spread: charging every sample its own
# jitter (tried) made the CPU's A/A intervals +-25%. On CUDA the events see only the GPU's work, and on the
# H200 the judge's clock ran up to 3x over them for honest subjects (torch.compile, before the busy floor;
# the cause was not found), so the CUDA tolerance stays at the in-process hidden-work rule's 1.5x + 0.5 ms.
TOLERANCE = {"cuda": (1.5, 0.5), "cpu": (1.03, 0.3)}
# One sample whose judge's time exceeds its claim by more than this counts the judge's time whatever the
# median says: a lie in a minority of samples moves a median little, and a large one not at all.
GROSS = {"cuda": (4.0, 2.0), "cpu": (2.0, 1.0)}
# A refresh (or the arm step) may take this much longer than its own floor before the excess is charged.
PREP_TOLERANCE = {"cuda": (1.5, 0.5), "cpu": (1.5, 0.3)}
FLOOR_SAMPLES = 9
FRESH_NOTE = "inputs drawn afresh each sample (reordering them leaves the outputs as they were)"
# A batch whose samples, by the judge's clock, are shorter than this share of the calibration's target is
# taken again with calls the judge chooses (Judge.time).
SHORT_SAMPLE = 0.5
REFRESH_EVERY = 16  # the judge's own refresh, past the first FLOOR_SAMPLES samples (see Judge.time)
# Besides the last sample's recheck, a candidate's sample is rechecked right after it, every set (a candidate
# wrong on a few sets of each sample escapes a check of one), with a chance of RECHECK_SHARE / i, i counting
# the samples this process has timed (past each warm-up, not those the subject calls descheduled, which it
# could claim to push i up), and never less than RECHECK_FLOOR. A candidate can tell timed calls from checked
# ones (its inputs' version counters, attacker round 12) and where it is in a batch; attacker round 36
# inflated i with a long honest batch and skipped the work in half of a retake's samples, escaping the falling
# chance about one time in seven (reward 2). So a sample faster than FAST_SAMPLE x the median of this
# process's samples found right so far (per call) is always rechecked, and so is the first: work skipped in a
# sample shows as a fast sample, and samples found right are honest, so a median can be forged by at most
# 1 / FAST_SAMPLE, and that only with partly skipped samples, each rechecked at least at the floor's chance.
RECHECK_SHARE = 1.5
# A candidate whose copy of a rechecked sample's outputs runs past LATE_COPY x its floor + a margin in at least
# this many rechecks, and in three quarters of them, is refused (Judge._outputs). Loose on purpose: the floor is
# a line through trusted copies of other sizes, and honest copies ran 1.0-2.2x it on the loaded CPU runner (a
# 16-tensor probe once understated a 1024-set answer 4x); a candidate that skips its work has every fast
# sample rechecked.
LATE_COPIES = 5
LATE_COPY = {"cuda": (4.0, 2.0), "cpu": (3.0, 1.0)}
# Beyond this, a rechecked sample's copy is charged to it (what the median of a batch's charges adds to every
# sample counts only where most samples were rechecked, as a candidate's that skips its work are).
COPY_TOLERANCE = {"cuda": (1.5, 0.5), "cpu": (1.5, 0.3)}
COPY_PROBE_BYTES = (4096, 1 << 20, 8 << 20)  # the sizes of the copy's floor (Judge._floors)
COPY_PROBE_COUNT = 256  # and a copy of this many small tensors: what each more tensor costs (a sample of
# a tiny operator answers for up to 1024 sets; 16 understated it 4x, its header's JSON and a mapping each)
RECHECK_FLOOR = 0.03
FAST_SAMPLE = 0.9
# What the subject may say of its own failure. Not operator_error: the judge loads the operator first and
# finds its faults itself, so a subject that claims one is a candidate blaming the operator.
SUBJECT_STATUSES = frozenset({"crashed", "build_error", "incorrect", "rejected"})


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def bound(
    clocks: list[tuple[float, float, float]], tolerance: tuple[float, float], gross: tuple[float, float]
) -> list[float]:
    """What each sample of a batch counts (all its calls), from (claimed, over, excess) per sample.

    `claimed` is what the subject's timer reported (events on CUDA), `over` how much longer the judge's clock
    saw from the 'go' to the answer, less an honest sample's overhead (measured on trusted work before any
    untrusted code loaded), `excess` what the subject's refresh and arm steps took beyond their floors (work
    moved out of the window). The batch's median `over` past `tolerance` and its median `excess` are added to
    every sample: a subject that understates consistently is charged what it hid, while the clock's jitter,
    sample to sample, does not widen the distribution. A sample past `gross` counts the judge's time alone."""
    claimed = [c for c, _, _ in clocks]
    factor, margin = tolerance
    hidden = max(0.0, _median([o for _, o, _ in clocks]) - ((factor - 1) * _median(claimed) + margin))
    moved = _median([e for _, _, e in clocks])
    counted = []
    for c, o, e in clocks:
        ms = c + hidden + moved
        if o + e > (gross[0] - 1) * c + gross[1]:
            ms = max(ms, c + o + e)
        counted.append(ms)
    return counted


def own_clock(
    counted: list[float], clocks: list[tuple[float, float, float]], go_floor_ms: float, ping_floor_ms: float
) -> list[float]:
    """Each sample at least the judge's time for it (go) less a bare round trip, which no sample's overhead
    undercuts, plus its excess. `over` in `clocks` is taken against the full-length sample's floor, so the
    difference is added back. An honest sample is charged its overhead beyond a ping (tens of µs); only
    short samples at calls fixed beforehand come here."""
    back = max(0.0, go_floor_ms - ping_floor_ms)
    return [max(ms, c + o + e + back) for ms, (c, o, e) in zip(counted, clocks, strict=True)]


def charge(step_ms: float, floor_ms: float, tolerance: tuple[float, float]) -> float:
    """What of an untimed step the subject controls (refresh, arm) is charged to its sample."""
    factor, margin = tolerance
    return max(0.0, step_ms - factor * floor_ms - margin)


def _along(points: list[tuple[float, float]], x: float) -> float:
    """The line through (x, y) points sorted by x at `x`: the first y below them, in proportion past them."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / max(x1 - x0, 1e-9)
    x1, y1 = points[-1]
    return y1 * x / max(x1, 1e-9)


def malformed(exc: link.LinkError) -> Failure:
    """What a message from the subject that breaks the link's rules makes of the evaluation."""
    return Failure("rejected", f"anti-hack check: the subject process sent {exc}")


def rebuild(description: Any, tensors: list[torch.Tensor], device: str, who: str) -> Any:
    """An output as the subject described it: its tensors on the judge's device, or Mismatch for other types."""
    try:
        is_seq, items = description
        out = []
        for index, item in enumerate(items):
            where = f" (output {index})" if len(items) > 1 else ""
            if "type" in item:
                raise compare.Mismatch(f"{who} returned {item['type']}{where}, not a torch.Tensor")
            if "layout" in item:
                raise compare.Mismatch(
                    f"{who} returned a {item['layout']} tensor{where}: outputs are compared as dense tensors, "
                    "so return .to_dense()"
                )
            out.append(tensors.pop(0).to(device))
    except compare.Mismatch:
        raise
    except Exception:
        raise link.LinkError("an output description that does not match its tensors") from None
    return out if is_seq else out[0]


class Judge:
    def __init__(self, peer: link.Peer) -> None:
        self.peer = peer
        self.device = "cpu"
        self.op: Operator | None = None
        self.candidate = False  # set by load()
        self._plain_samples = 0  # the samples timed so far, for the chance of a random recheck (_time)
        self.timer: timing.Timer | None = None
        self.go_floor_ms = self.ping_floor_ms = self.arm_floor_ms = 0.0
        # A copy of outputs' floor: (bytes, ms) points of one tensor, contiguous or not, and each more tensor's ms.
        self.copy_points: dict[bool, list[tuple[float, float]]] = {False: [(0.0, 0.0)], True: [(0.0, 0.0)]}
        self.copy_per_tensor_ms = 0.0
        self._outputs_budget = 0  # a timed sample's outputs' bytes at most, a set (a timing's set-up)
        self._copies: list[tuple[float, float, bool]] = []  # a timing's rechecks: copy ms, floor, late
        self._strided_reference = self._strided_said = (
            False  # outputs not contiguous: the operator's, the subject's
        )
        self._most_calls = timing.MAX_CALLS_PER_SAMPLE  # a timing's cap, one input set a call (_time)
        self.fresh = False  # inputs drawn afresh each sample, not reordered (_same_when_reordered)
        self._model64: Any = (
            None  # the reference in float64, built when first needed, dropped after the check
        )
        # Where this process's time went since the last answer (ms by step), sent with each answer: the
        # harness's own overhead per evaluation is measured from it (benchmarks/trust_gpu.py).
        self.spent: dict[str, float] = {}

    @contextlib.contextmanager
    def spend(self, step: str) -> Iterator[None]:
        t0 = _ns()
        try:
            yield
        finally:
            self.spent[step] = self.spent.get(step, 0.0) + (_ns() - t0) / 1e6

    def take_spent(self) -> dict[str, float]:
        spent, self.spent = self.spent, {}
        return {step: round(ms, 3) for step, ms in spent.items()}

    # -- talking to the subject ---------------------------------------------------------------------
    def ask(self, command: dict[str, Any], max_bytes: int = 0) -> tuple[dict[str, Any], list[torch.Tensor]]:
        return self.collect(self.post(command), max_bytes)

    def post(self, command: dict[str, Any]) -> int:
        try:
            return self.peer.post(command)
        except EOFError:
            raise Failure(
                "crashed", "the subject process ended before answering", subject_gone=True
            ) from None

    def collect(
        self, nonce: int, max_bytes: int = 0, heard: list[int] | None = None
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        try:
            answer, tensors = self.peer.answer(nonce, max_bytes=max_bytes, heard=heard)
        except EOFError:
            raise Failure(
                "crashed", "the subject process ended before answering", subject_gone=True
            ) from None
        except link.LinkError as exc:
            raise malformed(exc) from None
        if answer.get("ok") is not True:
            # The subject's word on its own failure: only a status it may give, only finite error figures.
            status = answer.get("status")
            status = status if status in SUBJECT_STATUSES else "crashed"
            extra = {
                k: float(answer[k])
                for k in ("max_abs_err", "max_rel_err")
                if isinstance(answer.get(k), float | int) and math.isfinite(answer[k])
            }
            raise Failure(status, str(answer.get("reason", ""))[:2000], **extra)
        return answer, tensors

    def _timed(self, command: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        t0 = _ns()
        answer, _ = self.ask(command)
        return (_ns() - t0) / 1e6, answer

    def _busy(self, calls: int) -> tuple[float, float]:
        """A trusted sample of `calls` tiny kernels in the subject: the judge's time and the subject's claim."""
        go_ms, answer = self._timed({"cmd": "go", "calls": calls})
        return go_ms, float(answer["ms_total"])

    def start(self, device: str) -> None:
        """The subject's bare round trips, before any untrusted code is in either process."""
        self.device = self.peer.device = device  # outputs then cross straight onto the device
        with self.spend("start: device"):
            self.timer = timing.Timer(device)
        with self.spend("start: subject ready"):
            hello, _ = self.ask({"cmd": "hello", "device": device})
        for step, ms in (hello.get("spent_ms") or {}).items():  # the subject's word: reported, never used
            if isinstance(ms, float | int) and isinstance(step, str):
                self.spent[f"subject {step[:40]}"] = float(ms)
        with self.spend("start: floors"):
            self._floors(device)

    def _floors(self, device: str) -> None:
        assert self.timer is not None
        pings = [self._timed({"cmd": "ping"})[0] for _ in range(FLOOR_SAMPLES)]
        # An honest sample's overhead beyond its claim: trusted work of a sample's length, timed by both.
        probe_ms = self._busy(64)[1]
        target_ms = timing.TARGET_SAMPLE_S[device] * 1e3
        calls = max(1, min(1_000_000, math.ceil(64 * target_ms / max(probe_ms, 1e-6))))
        overs = [go - claimed for go, claimed in (self._busy(calls) for _ in range(FLOOR_SAMPLES))]
        self.ping_floor_ms, self.go_floor_ms = _median(pings[2:]), _median(overs[2:])
        if device == "cuda":
            arms = []
            for _ in range(FLOOR_SAMPLES):
                self.timer.prepare_sample()
                arms.append(self._timed({"cmd": "arm"})[0])
            self.arm_floor_ms = _median(arms[2:])

    def _copy_floors(self) -> None:
        """A copy of outputs by its bytes, through trusted copies of a few sizes, contiguous and transposed, and
        of many small tensors (Judge._outputs holds a candidate's rechecked copies to the line through them).
        Taken as a candidate's load begins, before its file is sent: only a candidate's copies are held to it."""
        self.copy_points = {
            strided: [(size, self._copy_probe(size, strided)) for size in COPY_PROBE_BYTES]
            for strided in (False, True)
        }
        many = self._copy_probe(COPY_PROBE_BYTES[0], False, COPY_PROBE_COUNT)
        self.copy_per_tensor_ms = max(0.0, many - self.copy_points[False][0][1]) / (COPY_PROBE_COUNT - 1)

    def _copy_probe(self, size: int, strided: bool, count: int = 1) -> float:
        """The subject's time (question to header, ms) for a trusted copy of `count` tensors of `size` bytes,
        the median of two after a first."""
        command = {"cmd": "copy_floor", "bytes": size, "strided": strided, "count": count}
        most = count * (2 * size + (1 << 20))
        return _median([self._timed_copy(command, most)[1] for _ in range(3)][1:])

    def _timed_copy(
        self, command: dict[str, Any], max_bytes: int
    ) -> tuple[tuple[dict[str, Any], list[torch.Tensor]], float]:
        """An answer with tensors and the subject's part of it (the question to its header), ms."""
        heard: list[int] = []
        t0 = _ns()
        got = self.collect(self.post(command), max_bytes, heard)
        return got, (heard[0] - t0) / 1e6

    # -- commands from the parent -------------------------------------------------------------------
    def load(self, job: dict[str, Any]) -> None:
        if self.timer is None or self.device != job["device"]:
            if job["device"] == "cuda" and not torch.cuda.is_available():
                raise Failure(
                    "crashed", "CUDA was asked for but this machine has no CUDA device", who="operator"
                )
            self.start(job["device"])
        guards.pin_precision(bool(job.get("allow_tf32")))
        self.atol, self.rtol = job.get("atol"), job.get("rtol")
        self.at_scale = not job.get("own_atol")  # compare's scale rule, unless the operator declares its atol
        self.who = "the candidate" if job["subject"] == "candidate" else f"the {job['subject']} subject"
        self.candidate = job["subject"] == "candidate"  # the adversary of the verdict (docs/security.md)
        if self.candidate:
            with self.spend("start: copy floors"):
                self._copy_floors()  # nothing untrusted is in the subject process until the load below
        audit.install(audit.locations(job))
        # The subject loads (imports, builds, compiles) while the judge loads the operator: a fault of the
        # judge's own load is still found and reported first, the subject's answer read only after it.
        asked = self.post({"cmd": "load", "job": job})
        seed_all(0)
        try:
            with self.spend("load: operator"):
                self.op = Operator(job)
        except LoadError as exc:
            raise Failure("operator_error", str(exc), who=exc.who) from None
        with self.spend("load: subject"):
            self.collect(asked)

    def _reference(self, inputs: list[Any]) -> Any:
        assert self.op is not None
        try:
            with torch.no_grad():
                out = self.op.reference(*clone(inputs))
            if self.device == "cuda":
                torch.cuda.synchronize()
            return out
        except torch.OutOfMemoryError as exc:
            raise Failure("operator_error", out_of_memory("the operator (reference run)", exc)) from None
        except Exception as exc:
            raise Failure(
                "operator_error", f"the operator raised {type(exc).__name__}: {exc}"[:500]
            ) from None

    def _budget(self, refs: list[torch.Tensor], copies: int) -> int:
        return copies * (2 * sum(r.numel() * r.element_size() for r in refs) + (1 << 20))

    def _golden(self, inputs: list[Any], refs: list[torch.Tensor]) -> list[torch.Tensor] | str:
        """The reference run in float64 (module and floating inputs cast up), or why it cannot be."""
        assert self.op is not None
        try:
            if self._model64 is None:
                ref = self.op.reference
                self._model64 = copy.deepcopy(ref).double() if isinstance(ref, torch.nn.Module) else ref
            up = [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in inputs]
            with torch.no_grad():
                outs = compare.flatten(self._model64(*up), "the float64 reference")
            if self.device == "cuda":
                torch.cuda.synchronize()
        except torch.OutOfMemoryError:
            return "not enough memory for a float64 copy of the operator"
        except Exception as exc:
            return f"the operator in float64 raised {type(exc).__name__}: {exc}"[:300]
        for g, r in zip(outs, refs, strict=False):
            if r.is_floating_point() and (g.dtype != torch.float64 or g.shape != r.shape):
                return f"the operator in float64 returned {g.dtype} {list(g.shape)}"
        return outs if len(outs) == len(refs) else "the operator in float64 returned other outputs"

    def check(self, seeds: list[int]) -> dict[str, Any]:
        try:
            return self._check(seeds)
        finally:
            self._model64 = None  # a float64 copy of a network's weights is not kept past the check

    def _check(self, seeds: list[int]) -> dict[str, Any]:
        assert self.op is not None
        worst = compare.Error(0.0, 0.0)
        fingerprints: list[list[tuple[Any, ...]]] = []
        for index, case in enumerate(self.op.cases):
            for seed in seeds:
                # The subject runs while the judge makes its own inputs and reference (the check's two halves
                # overlap); its answer is read only once the reference says how many bytes may come back.
                asked = self.post({"cmd": "run", "case": index, "seed": seed, "repeat": 2})
                with self.spend("check: reference"):
                    inputs = case.make(seed)
                    if index == 0 and seed == seeds[0]:
                        self._same_inputs_again(inputs, case.make(seed))
                    ref = self._reference(inputs)
                try:
                    refs = compare.flatten(ref, "the reference")
                except compare.Mismatch as exc:
                    raise Failure("operator_error", f"{case.label}: {exc}") from None
                for k, r in enumerate(refs):
                    if r.is_floating_point() and r.numel() and bool(torch.isnan(r).all()):
                        raise Failure(
                            "operator_error",
                            f"{case.label} seed {seed}: output {k} of the reference is all NaN; nothing can be "
                            "checked against it (fix the operator or its input factory)",
                        )
                golden = compare.Golden(functools.partial(self._golden, inputs, refs))
                if index == 0 and seed == seeds[0]:
                    with self.spend("check: float64"):
                        golden.get()  # the errors against float64 are reported for one seed at least
                    with self.spend("check: reordering"):
                        self.fresh = self._drawn_afresh(inputs, ref)
                fingerprints.append([_fingerprint(r) for r in refs])
                with self.spend("check: subject"):
                    answer, tensors = self.collect(asked, self._budget(refs, 2))
                outputs = answer.get("outputs")
                if not isinstance(outputs, list) or len(outputs) != 2:
                    raise Failure("rejected", "anti-hack check: the subject process answered a run wrongly")
                try:
                    with self.spend("check: compare"):
                        out = rebuild(outputs[0], tensors, self.device, self.who)
                        again = rebuild(outputs[1], tensors, self.device, self.who)
                        err = compare.compare(out, ref, self.atol, self.rtol, golden, at_scale=self.at_scale)
                        compare.compare(  # same outputs twice, both right
                            again, ref, self.atol, self.rtol, golden, at_scale=self.at_scale
                        )
                except link.LinkError as exc:
                    raise malformed(exc) from None
                except compare.MismatchWithError as exc:
                    raise Failure(
                        "incorrect",
                        f"{case.label} seed {seed}: {exc}",
                        max_abs_err=exc.error.max_abs,
                        max_rel_err=exc.error.max_rel,
                        fp64_err=exc.error.fp64_err,
                        fp64_ref_err=exc.error.fp64_ref_err,
                    ) from None
                except compare.Mismatch as exc:
                    raise Failure("incorrect", f"{case.label} seed {seed}: {exc}") from None
                worst = worst.worse(err)
                with self.spend("check: compare"):
                    same = compare.identical_or_rounding(out, again, self.atol, self.rtol, refs, golden)
                if not same:
                    raise Failure(
                        "incorrect",
                        f"{case.label} seed {seed}: two runs on the same inputs disagree beyond rounding (a race or uninitialised memory)",
                    )
                del ref, out, again, refs, golden, inputs, tensors, answer  # one seed's tensors at a time
        degenerate = len(seeds) > 1 and all(f == fingerprints[0] for f in fingerprints[1 : len(seeds)])
        return {
            "max_abs_err": worst.max_abs,
            "max_rel_err": worst.max_rel,
            "fp64_err": worst.fp64_err,
            "fp64_ref_err": worst.fp64_ref_err,
            "by_fp64": worst.by_fp64,
            "degenerate": degenerate,
            "cases": [c.label for c in self.op.cases],
        }

    def _same_inputs_again(self, first: list[Any], second: list[Any]) -> None:
        """The subject makes its own inputs from the seed: the factory must give the same ones each time."""
        for a, b in zip(first, second, strict=True):
            same = (
                same_tensor(a, b) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) else a == b
            )
            if not same:
                raise Failure(
                    "operator_error",
                    "the operator's inputs differ between two draws with the same seed: draw them from torch's "
                    "random generators (seeded by the harness), not from another source",
                )

    def time(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """A timing batch. The subject chooses its calls per sample by its own calibration, which it can slow
        down on purpose: samples far shorter than the calibration's target (by this process's clock) would let
        the tolerance's margin, a fixed time a sample, cover all of a sample's work (an attacker's claim of
        ~0 passed so). Such a batch is taken again with calls this process chooses from its own clock; where the
        calls were fixed beforehand (a later round, the other side of a pair), its samples count this
        process's time instead (_time)."""
        timed = self._time(cmd)
        target_ms = timing.TARGET_SAMPLE_S[self.device] * 1e3
        calls, judged_ms = timed["calls_per_sample"], timed.pop("judged_sample_ms")
        assert self.op is not None
        # Not for a per-call sparse matrix: more calls than its sets would reuse each matrix in a sample.
        if not self._short(judged_ms, calls) or cmd.get("calls") or self.op.per_call_matrix:
            return timed
        chosen = min(self._most_calls, math.ceil(calls * target_ms / max(judged_ms, 1e-3)))
        again = self._time({**cmd, "calls": chosen})
        again.pop("judged_sample_ms")
        said = (
            f"the judge chose {chosen} calls a sample (the subject's {calls} made {judged_ms:.3f} ms samples)"
        )
        again["sample_note"] = "; ".join(n for n in (again.get("sample_note"), said) if n)
        return again

    def _short(self, judged_ms: float, calls: int) -> bool:
        """A candidate's samples too short (by this clock) for the tolerance's fixed margin to be small in them.
        Only a candidate's: base and head (PR code) are not adversaries of their own verdict, and a head
        faster than base at base's calls a sample would be charged its round trips' jitter."""
        target_ms = timing.TARGET_SAMPLE_S[self.device] * 1e3
        return self.candidate and judged_ms < SHORT_SAMPLE * target_ms and calls < self._most_calls

    def _time(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self.op is not None and self.timer is not None
        case = self.op.cases[0]
        seed = int(cmd.get("seed", 1_000_003))
        first = case.make(seed)
        budget = set_bytes_budget(self.device)
        # The most calls a sample may make: one input set each (worker.Subject.time_begin).
        self._most_calls = input_sets_for(timing.MAX_CALLS_PER_SAMPLE, nbytes(first), budget)
        # Calls fixed by another side (a pair, a later round) whose inputs allow more sets: capped here too.
        fixed = min(int(cmd["calls"]), self._most_calls) if cmd.get("calls") else None
        graph = cmd.get("graph", "off") if self.device == "cuda" else "off"
        with self.spend("time: set-up"):
            begun, _ = self.ask(
                {
                    "cmd": "time_begin",
                    "seed": seed,
                    "calls": fixed,
                    "budget": budget,
                    "graph": graph,
                }
            )
        calls, mode, note = begun.get("calls"), begun.get("mode"), begun.get("note")
        # How the subject's samples were taken is its word, checked for form only: a replayed graph is bounded
        # by this process's clock and its outputs re-checked like plain calls'.
        if mode not in ("graph", "calls") or (mode == "graph" and graph == "off"):
            raise Failure("rejected", f"anti-hack check: the subject process took samples by {mode!r}")
        note = note[:300] if isinstance(note, str) else None
        if type(calls) is not int or not 1 <= calls <= timing.MAX_CALLS_PER_SAMPLE:
            raise Failure(
                "rejected", f"anti-hack check: the subject process chose {calls!r} calls per sample"
            )
        if fixed is not None and calls != fixed:
            raise Failure("rejected", "anti-hack check: the subject process changed the calls per sample")
        n_sets = input_sets_for(calls, nbytes(first), budget)
        if begun.get("n_sets") != n_sets or calls > n_sets:
            raise Failure("rejected", "anti-hack check: the subject process rotates other input sets")
        with self.spend("time: set-up"):
            # The judge's own copies of the sets (the masters of its refreshes).
            originals = [first] + [case.make(seed + i) for i in range(1, n_sets)]
            # The judge's copy of what the subject's calls are given, refreshed as the subject's is.
            given = [clone(values) for values in originals]
            # What a sample's outputs may take, a set: read before the sample's references are computed; and
            # whether the operator's own outputs are strided (only then is a copy held to the strided floor:
            # that a tensor was strided is the subject's word, and its floor is ~10x the contiguous one's).
            reference = compare.flatten(self._reference(first), "the reference")
            self._outputs_budget = self._budget(reference, 1)
            self._strided_reference = any(not t.is_contiguous() for t in reference)
            self._copies, self._strided_said = [], False
        prep_tolerance = PREP_TOLERANCE[self.device]
        # The subject's refresh is held against the judge's own refresh of the same sets, taken just before
        # it. Past the first FLOOR_SAMPLES samples the judge refreshes its copy only at random, one sample in
        # REFRESH_EVERY (a refresh on every sample doubled each sample's work: two processes refreshing up to
        # 512 MiB each), and holds the others against the median of its recent refreshes; a sample that
        # would be charged against that median gets a refresh of the judge's own in the same moment first,
        # capped at twice the median (a subject that leaves work running to slow that refresh down gains no
        # more) and kept out of the median.
        floor_ms: list[float] = []  # the judge's refreshes taken before the subject's, past the warm-up
        sent: list[int] = []  # each sample's seed, in order
        given_seed = -1  # the seed the judge's copy was last refreshed with

        def own_refresh(seed: int) -> float:
            nonlocal given_seed
            with self.spend("time: judge's refresh"):
                ms = self._refresh(given, originals, seed)
            given_seed = seed
            return ms

        # Per call, this batch's plain samples whose rechecks passed (FAST_SAMPLE). Per batch: a retake's calls
        # a sample (or a graph's replays) change the per-call time honest samples show.
        right_ms: list[float] = []
        asked_share = cmd.get("recheck_share")
        share = RECHECK_SHARE if asked_share is None else max(0.0, float(asked_share))
        share = share if self.candidate else 0.0

        def take() -> timing.Sample:
            seed = secrets.randbits(62)
            before = None
            if len(floor_ms) < FLOOR_SAMPLES or secrets.randbelow(REFRESH_EVERY) == 0:
                before = own_refresh(seed)
                if len(sent) >= timing.WARMUP_SAMPLES:  # measure's warm-up takes run cold: not a floor
                    floor_ms.append(before)
            sent.append(seed)
            draw_ms = 0.0
            if self.fresh:  # drawn by a job on the subject's thread, before the check (worker's "draw")
                with self.spend("time: check"):  # the sealed server hands a command on only after a check:
                    self.ask({"cmd": "check"})  # asked apart, so that its cost is not the draw's
                with self.spend("time: prep"):
                    draw_ms, _ = self._timed({"cmd": "draw", "seed": seed})
            with self.spend("time: check"):  # not charged: the subject's state held to its load's (sealed.py)
                self.ask({"cmd": "check"})
            with self.spend("time: prep"):
                # `fresh` with every prep: the subject's own flag is a slot its code can set (round 45)
                prep_ms, _ = self._timed({"cmd": "prep", "seed": seed, "fresh": self.fresh})
            prep_ms += draw_ms  # the judge's own refresh, its floor, draws too
            trips = self.ping_floor_ms * (2 if self.fresh else 1)  # a draw is a round trip of its own
            if before is not None:
                excess = charge(prep_ms, trips + before, prep_tolerance)
            else:  # FLOOR_SAMPLES floors exist by now
                recent = _median(floor_ms[-FLOOR_SAMPLES:])
                excess = charge(prep_ms, trips + recent, prep_tolerance)
                if excess > 0:
                    retake = min(own_refresh(seed), 2 * recent)
                    excess = charge(prep_ms, trips + retake, prep_tolerance)
            if self.device == "cuda":
                assert self.timer is not None
                with self.spend("time: flush and arm"):
                    self.timer.prepare_sample()  # the L2 flush that counts: here, after the refreshes
                    arm_ms, _ = self._timed({"cmd": "arm"})
                excess += charge(arm_ms, self.arm_floor_ms, prep_tolerance)
            with self.spend("time: go"):
                go_ms, answer = self._timed({"cmd": "go"})
            claimed = answer.get("ms_total")
            if not isinstance(claimed, float | int) or not math.isfinite(claimed) or claimed < 0:
                raise Failure("rejected", "anti-hack check: the subject process reported an impossible time")
            if share and len(sent) > timing.WARMUP_SAMPLES:
                plain, per_call = answer.get("descheduled") is not True, float(claimed) / calls
                self._plain_samples += plain
                chance = max(share / max(1, self._plain_samples), RECHECK_FLOOR)
                # descheduled or not: that is the subject's word (attacker round 38 said it of its skipped samples)
                fast = not right_ms or per_call < FAST_SAMPLE * _median(right_ms[-64:])
                if fast or secrets.randbelow(1 << 20) < chance * (1 << 20):
                    # after the sample's window: the subject learns that this sample is rechecked only now
                    with self.spend("time: recheck"):
                        outputs, moved, late = self._outputs(len(given))
                    excess += moved  # beyond its tolerance: work done after the answer, charged to the sample
                    if given_seed != seed:
                        own_refresh(seed)
                    with self.spend("time: recheck"):
                        self._recheck(given, outputs)
                    if plain:  # a late copy's charge too: right outputs by work after the answer set no pace
                        right_ms.append(per_call + (moved / calls if late else 0.0))
                    if self.device == "cuda":
                        torch.cuda.empty_cache()  # the reference's blocks, before the subject's next sample
            return timing.Sample(
                float(claimed) / calls,
                descheduled=answer.get("descheduled") is True,
                hidden=answer.get("hidden") is True,
                clock=(float(claimed), go_ms - self.go_floor_ms - float(claimed), excess),
            )

        clock_before = self.timer.sm_clock()
        samples = timing.measure(
            take,
            calls=calls,
            min_samples=int(cmd["min_samples"]),
            max_samples=int(cmd["max_samples"]),
            target_rse=float(cmd["target_rse"]),
            budget_s=float(cmd["budget_s"]),
        )
        if samples.hidden * 2 > len(samples.times_ms):
            raise Failure(
                "rejected",
                f"anti-hack check: in {samples.hidden} of {len(samples.times_ms)} samples {HIDDEN_WORK} (work on another stream or thread)",
            )
        with self.spend("time: recheck"):
            outputs, _, _ = self._outputs(len(given))  # the last sample's (one of many: not charged)
        if sent and sent[-1] != given_seed:  # the judge's copy as the last sample's calls saw it
            own_refresh(sent[-1])
        with self.spend("time: recheck"):
            self._recheck(given, outputs)  # the inputs the last sample's calls were given
        self._refuse_late_copies()
        with self.spend("time: guard"):
            self.ask({"cmd": "guard"})  # once the outputs are the judge's: what the subject left in place
        clocks = [s.clock for s in samples.kept]
        counted = bound(clocks, TOLERANCE[self.device], GROSS[self.device])
        judged_ms = _median([c + o for c, o, _ in clocks])  # a sample by this process's clock
        if self._short(judged_ms, calls):
            # Samples this short at calls fixed beforehand (a subject fast now, slow when they were chosen):
            # the margin could cover a whole sample, so each counts this process's time less a bare round
            # trip (a ping). Less a full-length sample's overhead, a forged sample of 38 us of work counted
            # 17 us on an H100 host; less a one-call sample's, 24 of 55 us on the loaded CPU runner.
            counted = own_clock(counted, clocks, self.go_floor_ms, self.ping_floor_ms)
        return {
            "times_ms": [ms / calls for ms in counted],
            "debug": [clocks, self.go_floor_ms],
            "calls_per_sample": calls,
            "sample_mode": mode,
            "sample_note": "; ".join(n for n in (note, FRESH_NOTE if self.fresh else None) if n) or None,
            "stopped_by": samples.stopped_by,
            "sm_clock_mhz": [clock_before, self.timer.sm_clock()],
            "l2_flush": self.device == "cuda",
            "l2_persist_reset": self.device == "cuda" and self.timer.prepare_sample(),
            "wall_bound": sum(ms > c * 1.001 for ms, (c, _, _) in zip(counted, clocks, strict=True)),
            "judged_sample_ms": judged_ms,
        }

    def _drawn_afresh(self, inputs: list[Any], ref: Any) -> bool:
        """Whether a timed sample's inputs are drawn afresh from the factory rather than reordered: where the
        reference's outputs stay the same (to rounding) when its inputs are reordered as a sample's are (a
        full sum, a sort, inputs that are all structure), a candidate could keep its answers from sample to
        sample; where the operator fails on reordered inputs (an integer input with a structure that is not
        sorted: an edge list, sequence lengths), only the factory makes valid ones. Two reorders, so that a
        change that happens to fall within the rounding margin once does not decide it."""
        for _ in range(2):
            moved = clone(inputs)
            refresh([moved], [inputs], secrets.randbits(62))
            try:
                out = self._reference(moved)
            except Failure:
                return True
            try:
                if not compare.identical_or_rounding(out, ref, self.atol, self.rtol):
                    return False
            except compare.Mismatch:  # another shape or type: not the same
                return False
        return True

    def _refresh(self, sets: list[list[Any]], masters: list[list[Any]], seed: int) -> float:
        """The judge's own refresh, as the subject's; its time in ms."""
        assert self.op is not None
        t0 = _ns()
        refresh(
            sets,
            masters,
            seed,
            renew=self.op.per_call_matrix,
            drawn=draw(self.op.cases[0].make, seed, len(sets)) if self.fresh else None,
        )
        if self.device == "cuda":
            torch.cuda.synchronize()
        return (_ns() - t0) / 1e6

    def _outputs(self, n_sets: int) -> tuple[tuple[dict[str, Any], list[torch.Tensor]], float, bool]:
        """A timed sample's outputs, asked for straight after its answer and read before anything else (the
        judge's own refresh and references come after). Native code of a candidate's can hook a C function
        the copy path calls (attacker round 52: `os.read`'s method table, reward 3 with the static check on)
        and compute the outputs there, after the sample's clock. So the subject's part of the copy (the
        question to its answer's header) is held to a floor taken before any untrusted code loaded (_floors:
        a line through trusted copies by bytes and tensors; a copy checks only what it runs, so its cost does
        not grow with what the subject loads): what it takes beyond COPY_TOLERANCE is charged to the sample (the
        second value; the third says whether it ran past LATE_COPY), and a candidate whose copies run far past it
        in most rechecks is refused
        (_refuse_late_copies). A fast sample is always rechecked, so such work shows in every
        sample it helped. The judge reads the pieces in an order of its own (link.py): outputs written into
        the region while it reads cannot keep ahead of it."""
        got, copy_ms = self._timed_copy({"cmd": "outputs"}, self._outputs_budget * n_sets)
        specs, tensors = got[0].get("tensors") or [], got[1]
        sizes = [t.nelement() * t.element_size() for t in tensors]  # as received: sized and checked by link
        said = any(isinstance(spec, dict) and spec.get("strided") is True for spec in specs)
        self._strided_said |= said
        strided = said and self._strided_reference
        floor_ms = _along(self.copy_points[strided], sum(sizes)) + self.copy_per_tensor_ms * max(
            0, len(sizes) - 1
        )
        if not self.candidate:  # base and head are PR code, not adversaries of their own verdict (as _short)
            return got, 0.0, False
        late = charge(copy_ms, floor_ms, LATE_COPY[self.device]) > 0
        self._copies.append((copy_ms, floor_ms, late))
        return got, charge(copy_ms, floor_ms, COPY_TOLERANCE[self.device]), late

    def _refuse_late_copies(self) -> None:
        """A candidate whose copies of its outputs ran past LATE_COPY in three quarters of the rechecks (at least
        LATE_COPIES): work after the answer, each time the outputs were asked for. Only a candidate's (as
        _short)."""
        late = [(ms, floor) for ms, floor, was_late in self._copies if was_late]
        if len(late) >= LATE_COPIES and 4 * len(late) >= 3 * len(self._copies):
            raise Failure(
                "rejected",
                f"anti-hack check: in {len(late)} of {len(self._copies)} rechecks the subject's copy of a timed "
                f"sample's outputs took far longer than a copy of that size (median "
                f"{_median([ms for ms, _ in late]):.2f} ms against {_median([f for _, f in late]):.2f} ms: work "
                "done after the sample's answer, outside its clock)"
                + (
                    "; it returned non-contiguous outputs where the operator's are contiguous, which are copied "
                    "element by element: return them contiguous"
                    if self._strided_said and not self._strided_reference
                    else ""
                ),
            )

    def _recheck(self, masters: list[list[Any]], outputs: tuple[dict[str, Any], list[torch.Tensor]]) -> None:
        """What the timed calls returned (`_outputs`), against the reference on the inputs they were given, by
        the check's own rule (an output the elementwise rule rejects may pass by the float64 one, as in the
        check)."""
        answer, tensors = outputs
        refs = [self._reference(values) for values in masters]
        described = answer.get("outputs")
        if not isinstance(described, list) or len(described) != len(masters):
            raise Failure("rejected", "anti-hack check: the subject process answered for other input sets")
        try:
            for values, desc, ref in zip(masters, described, refs, strict=True):
                golden = compare.Golden(
                    functools.partial(self._golden, values, compare.flatten(ref, "the reference"))
                )
                try:
                    out = rebuild(desc, tensors, self.device, self.who)
                    compare.compare(out, ref, self.atol, self.rtol, golden, at_scale=self.at_scale)
                except link.LinkError as exc:
                    raise malformed(exc) from None
                except compare.Mismatch as exc:
                    wrong = Failure("incorrect", f"outputs of the timed calls are wrong: {exc}")
                    # What the guard finds (a thread still computing, a replaced name) says why: raised instead.
                    self.ask({"cmd": "guard"})
                    raise wrong from None
        finally:
            self._model64 = None  # as after the check: a float64 copy of the weights is not kept


def _fingerprint(t: torch.Tensor) -> tuple[Any, ...]:
    """Enough of a reference output to tell two seeds' apart without keeping either alive."""
    flat = t.detach().reshape(-1)
    if flat.numel() == 0:
        return (0,)
    return (compare.wide_sum(flat), flat[:8].tolist(), flat.numel())


def main() -> None:
    key_fd, result_fd, to_subject, from_subject, region = (int(a) for a in sys.argv[1:6])
    device, lazy = sys.argv[6], sys.argv[7:] == ["lazy"]
    with os.fdopen(key_fd, "rb") as handle:
        key = handle.read()
    for fd in (result_fd, to_subject, from_subject, region):
        os.set_inheritable(fd, False)
    judge = Judge(link.Peer(to_subject, from_subject, region))
    judge.spent["start: import"] = (time.time() - _ENTERED_AT) * 1e3
    # The floors are taken now, before the first command: the subject starts its device meanwhile, and no
    # untrusted code is in either process yet. A lazy sandbox (started ahead while another one times on this
    # device) leaves them, and the device, to its first command (load).
    if not lazy and (device != "cuda" or torch.cuda.is_available()):
        with contextlib.suppress(Failure):
            judge.start(device)

    def reply(payload: dict[str, Any]) -> None:
        refused = audit.refusal()
        if refused is not None:  # the operator's own code, here: the run is void
            payload = {"ok": False, "status": "operator_error", "reason": f"the sandbox refused {refused}"}
        payload = {**payload, "spent_ms": judge.take_spent(), "entered_at": _ENTERED_AT}
        write_frame(result_fd, seal(key, payload))

    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            if cmd["cmd"] == "load":
                judge.load(cmd["job"])
                reply({"ok": True})
            elif cmd["cmd"] == "check" and judge.op is not None:
                reply({"ok": True, **judge.check(cmd["seeds"])})
            elif cmd["cmd"] == "time" and judge.op is not None:
                with torch.no_grad():
                    reply({"ok": True, **judge.time(cmd)})
            elif cmd["cmd"] == "quit":
                with contextlib.suppress(Exception):
                    judge.peer.ask({"cmd": "quit"}, timeout_s=5)
                reply({"ok": True})
                return
            else:
                reply({"ok": False, "status": "crashed", "reason": f"bad command {cmd.get('cmd')!r}"})
        except Failure as exc:
            reply({"ok": False, "status": exc.status, "reason": exc.reason, **exc.extra})
        except torch.OutOfMemoryError as exc:  # the reference, its float64 run and the copies the check keeps
            reply({"ok": False, "status": "operator_error", "reason": out_of_memory("the judge", exc)})
        except BaseException as exc:  # only the operator's code and ours run here: never the subject's fault
            reply({"ok": False, "status": "operator_error", "reason": f"{type(exc).__name__}: {exc}"[:2000]})
        if judge.device == "cuda":
            torch.cuda.empty_cache()  # what this process holds between commands is the subject's to use


if __name__ == "__main__":
    main()
