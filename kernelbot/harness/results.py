"""Typed results of one evaluation; shared by the harness, the pipeline and storage."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
from scipy import stats

SCHEMA_VERSION = 1  # bump when a field changes meaning; stored with every JSON and database row
# Bump when what a timing means changes (harness/timing.py, worker.py): cached baselines of another protocol
# are measured again. 2: calls run without autograd, as they are checked (1 timed them recording autograd).
# 3: a GPU sample counts at least its wall time less the host latency (timing.counted_ms).
# 4: samples taken by the judge process, each bounded by its own clock (judge.py); inputs permuted per sample.
# 5: the judge's clock bounds batch medians past a busy floor (judge.bound); a CPU sample may hold 10k calls.
TIMING_PROTOCOL = 5

STATUSES = ("ok", "incorrect", "crashed", "timeout", "build_error", "rejected")


@dataclass
class Timing:
    median_ms: float  # median per-call time over samples
    mean_ms: float
    std_ms: float  # sample standard deviation
    ci95_ms: tuple[float, float]  # 95% bootstrap interval of the median
    samples: int  # number of samples (each may average several calls)
    calls_per_sample: int  # calls averaged into one sample (short operators use many)
    stopped_by: str  # what ended sampling: "rse", "budget", "max_samples"
    raw_ms: list[float] = field(default_factory=list)  # every sample, kept for the history database
    sm_clock_mhz: list[int | None] = field(default_factory=list)  # SM clock before and after (GPU)
    l2_flush: bool = False  # L2 was flushed before each sample
    l2_persist_reset: bool = False  # the persisting-L2 carve-out was reset before each sample
    other_runs_ms: list[float] = field(default_factory=list)  # medians of the same subject's other sandboxes
    # GPU samples that counted their wall time, not just the timed stream's event time (timing.counted_ms)
    wall_bound: int = 0
    sample_mode: str = "calls"  # "graph": each sample one replay of a CUDA graph of its calls; "calls": plain
    # why a graph was asked for and not used; that the judge chose the calls a sample (judge.Judge.time)
    sample_note: str | None = None

    @classmethod
    def from_samples(cls, raw: list[float], calls: int, stopped_by: str, **extra: Any) -> Timing:
        data = np.asarray(raw, dtype=float)
        if len(data) >= 3 and float(np.ptp(data)) > 0:
            boot = stats.bootstrap(
                (data,),
                np.median,
                n_resamples=2000,
                confidence_level=0.95,
                method="percentile",
                random_state=np.random.default_rng(0),
            )
            ci = (float(boot.confidence_interval.low), float(boot.confidence_interval.high))
        else:
            ci = (float(np.median(data)), float(np.median(data)))
        return cls(
            median_ms=float(np.median(data)),
            mean_ms=float(data.mean()),
            std_ms=float(data.std(ddof=1)) if len(data) > 1 else 0.0,
            ci95_ms=ci,
            samples=len(data),
            calls_per_sample=calls,
            stopped_by=stopped_by,
            raw_ms=[float(x) for x in data],
            **extra,
        )

    def public(self) -> dict[str, Any]:
        """The fields the JSON report shows (raw samples go to the database, not the report)."""
        out = asdict(self)
        out.pop("raw_ms")
        out["ci95_ms"] = list(self.ci95_ms)
        return out

    @classmethod
    def from_public(cls, data: dict[str, Any]) -> Timing:
        known = {f.name for f in fields(cls)}  # a report written by another version may have more or fewer
        return cls(**{**{k: v for k, v in data.items() if k in known}, "ci95_ms": tuple(data["ci95_ms"])})


@dataclass
class Evaluation:
    subject: str  # "operator", "eager", "compile", "candidate"
    status: str  # one of STATUSES, or "operator_error" when the operator itself misbehaves
    reason: str = ""  # why it is not ok, in words a kernel author can act on
    max_abs_err: float | None = None  # against the reference, over all seeds and cases
    max_rel_err: float | None = None
    # RMS errors against a float64 run of the reference: the subject's and the float32 reference's own
    # (compare.fp64_rule); by_fp64: it passed by that rule where the elementwise tolerance rejected it
    fp64_err: float | None = None
    fp64_ref_err: float | None = None
    by_fp64: bool = False
    timing: Timing | None = None
    degenerate: bool = False  # outputs did not depend on the seed (the operator cannot be checked)
    cases: list[str] = field(default_factory=list)  # the input cases checked
    cached: bool = False  # timing came from the baseline cache

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def fp64_ratio(self) -> float | None:
        """How many times the float32 reference's error against float64 this subject's is."""
        if self.fp64_err is None or not self.fp64_ref_err:
            return None
        return self.fp64_err / self.fp64_ref_err

    def public(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "fp64_err": self.fp64_err,
            "fp64_ref_err": self.fp64_ref_err,
            "fp64_ratio": self.fp64_ratio,
            "by_fp64": self.by_fp64,
            "timing": self.timing.public() if self.timing else None,
        }

    @classmethod
    def from_public(cls, subject: str, data: dict[str, Any]) -> Evaluation:
        """An evaluation as a report shows it (public()); what the report leaves out stays at its default."""
        timing = data.get("timing")
        kept = ("status", "reason", "max_abs_err", "max_rel_err", "fp64_err", "fp64_ref_err", "by_fp64")
        return cls(
            subject,
            **{k: data[k] for k in kept if k in data},
            timing=None if timing is None else Timing.from_public(timing),
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.timing is not None:
            data["timing"]["ci95_ms"] = list(self.timing.ci95_ms)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evaluation:
        data = dict(data)
        if data.get("timing"):
            t = dict(data["timing"])
            t["ci95_ms"] = tuple(t["ci95_ms"])
            data["timing"] = Timing(**t)
        return cls(**data)


def reward(
    candidate: Evaluation, eager: Evaluation | None, compiled: Evaluation | None, margin: float = 0.05
) -> int:
    """CUDA Agent's milestone reward: -1 wrong, 1 correct, 2 >5% faster than eager, 3 also than torch.compile."""
    if not candidate.ok or candidate.timing is None:
        return -1

    def beats(base: Evaluation | None) -> bool:
        if base is None or not base.ok or base.timing is None or candidate.timing is None:
            return False
        t0, t = base.timing.median_ms, candidate.timing.median_ms
        return (t0 - t) / t0 > margin

    if not beats(eager):
        return 1
    # A torch.compile baseline that failed to build or run cannot be beaten, only skipped: level 2.
    return 3 if beats(compiled) else 2


def speedup(base: Evaluation | None, subject: Evaluation) -> float | None:
    if base is None or base.timing is None or subject.timing is None or subject.timing.median_ms <= 0:
        return None
    return base.timing.median_ms / subject.timing.median_ms
