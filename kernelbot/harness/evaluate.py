"""Parent side: evaluate one subject (load, check on fresh seeds, time) in its own sandbox."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelbot.harness import stop
from kernelbot.harness.container import ContainerSandbox
from kernelbot.harness.results import Evaluation, Timing
from kernelbot.harness.sandbox import Sandbox, SandboxFailure
from kernelbot.harness.staticcheck import scan


@dataclass(frozen=True)
class Settings:
    timeout_s: float = 300.0  # per request to the judge (load, check, or one timing run)
    seeds: int = 5  # fresh input sets for the correctness check
    min_samples: int = 10
    max_samples: int = 200
    target_rse: float = 0.005
    time_budget_s: float = 5.0
    recheck_share: float | None = None  # a candidate's random rechecks; None: judge.RECHECK_SHARE, 0: off
    memory_limit_mb: int = 16384
    cache_dir: Path | None = None  # torch.compile / Triton caches, per fingerprint
    sandbox: str = (
        "bwrap"  # the OS sandbox of untrusted code (jail.py): "bwrap", or "none" (explicit opt-out)
    )
    deadline: float | None = None  # time.monotonic() past which no request runs (the run's --time)
    gpu: str | None = None  # the one GPU its sandboxes see (CUDA_VISIBLE_DEVICES); None: all visible


OUT_OF_TIME = "stopped: the run's time limit (--time) ran out"


def out_of_time(status: str, reason: str) -> bool:
    """Cut by the run's deadline (Handle's own branches), not judged. By status too, not the reason alone: a
    candidate that raised an exception named `stopped` with that text once dodged its −1 so, but no subject
    can give the status "timeout"."""
    return status == "timeout" and reason == OUT_OF_TIME


class Handle:
    """A live sandbox holding one loaded subject; lets the caller interleave timing of several."""

    def __init__(
        self,
        job: dict[str, Any],
        subject: str,
        settings: Settings,
        *,
        candidate: str | None = None,
        compile_mode: str | None = None,
        require_kernel: bool = False,
        static_check: bool = True,  # off only in tests that show what the runtime layer catches alone
        started: Sandbox | None = None,  # one `start_ahead` made for this job and subject, else a new one
    ) -> None:
        self.subject, self.settings = subject, settings
        self.failure: Evaluation | None = None
        # Where the evaluation's time went, ms by step (the judge's account, and the sandbox's start here).
        self.spent: dict[str, float] = {}
        self._created_at = time.time()
        self.calls: int | None = None  # fixed after the first timing batch so later batches compare
        # How samples are taken on CUDA (worker.Subject.time_begin): "off" plain calls; "auto" a CUDA graph
        # replay for short operators; "on" a graph wherever it can be captured. measure.run_rounds fixes it.
        self.graph = "off"
        self.sandbox: Sandbox | ContainerSandbox | None = None
        if candidate is not None and static_check:
            findings = _static_findings(Path(candidate), may_switch_tf32(job), require_kernel)
            if findings:  # caught before any of its code runs
                if started is not None:
                    started.close()
                self.failure = Evaluation(subject, "rejected", "static check: " + findings)
                return
        # Absolute paths: the jail starts in its private /tmp, not in our working directory.
        job = {**job, "root": str(Path(job["root"]).resolve())}
        candidate = str(Path(candidate).resolve()) if candidate is not None else None
        self.sandbox = started or _sandbox(job, subject, settings, candidate)
        load = {**job, "subject": subject, "candidate": candidate, "compile_mode": compile_mode}
        self._ask({"cmd": "load", "job": load})

    def _ask(self, command: dict[str, Any]) -> dict[str, Any] | None:
        stop.check()  # a stop swallowed while a sandbox started
        if self.failure is not None or self.sandbox is None:
            return None
        timeout_s = self.settings.timeout_s
        if self.settings.deadline is not None:
            left = self.settings.deadline - time.monotonic()
            if left <= 0:
                self.failure = Evaluation(self.subject, "timeout", OUT_OF_TIME)
                self.sandbox.kill()
                return None
            timeout_s = min(timeout_s, left)
        try:
            answer = self.sandbox.request(command, timeout_s)
        except SandboxFailure as exc:
            by_deadline = exc.status == "timeout" and timeout_s < self.settings.timeout_s
            self.failure = Evaluation(self.subject, exc.status, OUT_OF_TIME if by_deadline else exc.reason)
            self.sandbox.kill()
            return None
        self._account(answer)
        if not answer.get("ok"):
            self.failure = Evaluation(
                self.subject,
                answer["status"],
                answer.get("reason", ""),
                answer.get("max_abs_err"),
                answer.get("max_rel_err"),
                answer.get("fp64_err"),
                answer.get("fp64_ref_err"),
            )
            self.sandbox.kill()
            return None
        return answer

    def _account(self, answer: dict[str, Any]) -> None:
        entered_at = answer.pop("entered_at", None)
        if isinstance(entered_at, float) and "start: launch" not in self.spent:
            self.spent["start: launch"] = round((entered_at - self._created_at) * 1e3, 3)
        for step, ms in (answer.pop("spent_ms", None) or {}).items():
            self.spent[step] = round(self.spent.get(step, 0.0) + ms, 3)

    def check(self, n_seeds: int | None = None) -> dict[str, Any] | None:
        """Check on `n_seeds` fresh seeds (default: the settings' count, the protocol's check)."""
        n = self.settings.seeds if n_seeds is None else n_seeds
        seeds = [secrets.randbelow(2**31 - 1) for _ in range(n)]  # fresh every time
        return self._ask({"cmd": "check", "seeds": seeds})

    def time_batch(self, min_samples: int, max_samples: int, budget_s: float) -> dict[str, Any] | None:
        answer = self._ask(
            {
                "cmd": "time",
                "min_samples": min_samples,
                "max_samples": max_samples,
                "target_rse": self.settings.target_rse,
                "budget_s": budget_s,
                "recheck_share": self.settings.recheck_share,
                "calls": self.calls,
                "graph": self.graph,
                "seed": secrets.randbelow(2**31 - 1),
            }
        )
        if answer is not None:
            self.calls = answer["calls_per_sample"]
        return answer

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sandbox(
    job: dict[str, Any], subject: str, settings: Settings, candidate: str | None, lazy: bool = False
) -> Sandbox | ContainerSandbox:
    """The sandbox an evaluation of `subject` runs in (job root and candidate already absolute)."""
    readable = [Path(job["root"])] + ([Path(candidate)] if candidate is not None else [])
    # The container sandbox (container.py) has the same interface, with the pair inside a container.
    if settings.sandbox == "container":
        return ContainerSandbox(
            device=job["device"], memory_limit_mb=settings.memory_limit_mb, cache_dir=settings.cache_dir,
            readable=readable, mode=settings.sandbox, untrusted_cache=subject == "candidate", gpu=settings.gpu,
        )  # fmt: skip
    return Sandbox(
        device=job["device"], memory_limit_mb=settings.memory_limit_mb, cache_dir=settings.cache_dir,
        readable=readable, mode=settings.sandbox, untrusted_cache=subject == "candidate", gpu=settings.gpu,
        lazy=lazy,
    )  # fmt: skip


def start_ahead(job: dict[str, Any], subject: str, settings: Settings) -> Sandbox | None:
    """A process sandbox for a later `Handle(job, subject, settings, started=...)`, started now and lazy:
    its interpreters import while other work runs, and it touches the device only once loaded. None where
    the sandbox is a container (each is its own, made when needed). Not for a candidate, whose file the
    sandbox must be able to read."""
    assert subject != "candidate", "a candidate's sandbox binds its file: make it with the Handle"
    if settings.sandbox == "container":
        return None
    job = {**job, "root": str(Path(job["root"]).resolve())}
    box = _sandbox(job, subject, settings, None, lazy=True)
    assert isinstance(box, Sandbox)
    return box


def may_switch_tf32(job: dict[str, Any]) -> bool:
    """Whether a candidate of this job may switch TF32 on inside its own calls: where the policy allows TF32,
    or where it declared a precision that needs TF32 Tensor Cores (tf32, or tf32x3's emulated float32)."""
    return bool(job.get("allow_tf32")) or job.get("candidate_precision") in ("tf32", "tf32x3")


def _static_findings(path: Path, allow_tf32: bool, require_kernel: bool) -> str:
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read {path.name}: {exc}"
    findings = scan(source, allow_tf32=allow_tf32, require_kernel=require_kernel)
    return "; ".join(f"line {f.line}: {f.message}" for f in findings[:3])


def timing_from(answers: list[dict[str, Any]]) -> Timing:
    raw = [t for a in answers for t in a["times_ms"]]
    last = answers[-1]
    clocks = [answers[0]["sm_clock_mhz"][0], last["sm_clock_mhz"][-1]]
    return Timing.from_samples(
        raw,
        last["calls_per_sample"],
        last["stopped_by"],
        sm_clock_mhz=clocks,
        l2_flush=last["l2_flush"],
        l2_persist_reset=last["l2_persist_reset"],
        wall_bound=sum(a.get("wall_bound", 0) for a in answers),
        sample_mode=last.get("sample_mode", "calls"),
        sample_note=next((a["sample_note"] for a in answers if a.get("sample_note")), None),
    )


def evaluate(
    job: dict[str, Any],
    subject: str,
    settings: Settings,
    *,
    candidate: str | None = None,
    compile_mode: str | None = None,
    time_it: bool = True,
    require_kernel: bool = False,
    static_check: bool = True,
) -> Evaluation:
    """Check `subject` against the operator's reference on fresh seeds, then time it (adaptive)."""
    with Handle(
        job,
        subject,
        settings,
        candidate=candidate,
        compile_mode=compile_mode,
        require_kernel=require_kernel,
        static_check=static_check,
    ) as handle:
        checked = handle.check()
        if checked is None:
            assert handle.failure is not None
            return handle.failure
        result = Evaluation(
            subject,
            "ok",
            max_abs_err=checked["max_abs_err"],
            max_rel_err=checked["max_rel_err"],
            fp64_err=checked["fp64_err"],
            fp64_ref_err=checked["fp64_ref_err"],
            by_fp64=checked["by_fp64"],
            degenerate=checked["degenerate"],
            cases=checked["cases"],
        )
        if time_it:
            answer = handle.time_batch(settings.min_samples, settings.max_samples, settings.time_budget_s)
            if answer is None:
                assert handle.failure is not None
                failure = handle.failure
                failure.max_abs_err, failure.max_rel_err = result.max_abs_err, result.max_rel_err
                return failure
            result.timing = timing_from([answer])
        return result
