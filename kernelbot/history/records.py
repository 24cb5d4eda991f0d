"""The history's typed records: what the pipeline stores and what publish and the reports read back."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

if TYPE_CHECKING:
    from kernelbot.harness.results import Evaluation

SCHEMA_VERSION = 1  # of these records and the JSON payloads stored with them

Trigger = Literal["pull_request", "command", "local", "schedule"]
RunStatus = Literal["running", "completed", "failed"]
Side = Literal["base", "head", "eager", "compile", "candidate"]
Change = Literal["added", "modified", "removed", "cosmetic", "unchanged"]
VerdictKind = Literal["regression", "improvement", "no_change", "ambiguous", "error"]


@dataclass
class FingerprintRecord:
    gpu: str  # GPU model name ("NVIDIA H100 80GB HBM3"), or "cpu"
    driver: str = ""  # NVIDIA driver version
    cuda: str = ""  # CUDA runtime version torch was built with
    torch: str = ""  # torch.__version__
    cupy: str = ""  # cupy.__version__, "" when absent
    kernelbot: str = ""  # kernelbot.__version__
    extra: dict[str, Any] = field(default_factory=dict)  # anything else that changes timings (clocks, flags)

    @property
    def key(self) -> str:
        """Measurements are compared only within one key: the hash of everything above."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


@dataclass
class MeasurementRecord:
    side: Side  # what was timed: the base or head operator, a baseline, or a candidate
    status: str  # harness status: "ok", "incorrect", "crashed", "timeout", ...
    reason: str = ""  # why it is not ok, in words
    max_abs_err: float | None = None  # against the reference
    max_rel_err: float | None = None
    median_ms: float | None = None  # None when nothing was timed
    mean_ms: float | None = None
    std_ms: float | None = None
    ci95_low_ms: float | None = None  # 95% interval of the median
    ci95_high_ms: float | None = None
    samples: int = 0  # number of samples
    calls_per_sample: int = 1  # calls averaged into one sample
    stopped_by: str = ""  # what ended sampling: "rse", "budget", "max_samples"
    raw_ms: list[float] = field(default_factory=list)  # every sample, exactly as taken
    sm_clock_mhz: list[int | None] = field(default_factory=list)  # SM clock before and after (GPU)
    fingerprint: FingerprintRecord | None = None  # None: the run's fingerprint

    @classmethod
    def from_evaluation(cls, side: str, ev: Evaluation) -> MeasurementRecord:
        """The harness's result of timing one subject (side: one of Side)."""
        if side not in get_args(Side):
            raise ValueError(f"side {side!r} is not one of {get_args(Side)}")
        record = cls(cast(Side, side), **fields_of(ev, ("status", "reason", "max_abs_err", "max_rel_err")))
        if (t := ev.timing) is None:
            return record
        timing = fields_of(t, ("median_ms", "mean_ms", "std_ms", "samples", "calls_per_sample", "stopped_by"))
        return replace(record, **timing, ci95_low_ms=t.ci95_ms[0], ci95_high_ms=t.ci95_ms[1],
                       raw_ms=list(t.raw_ms), sm_clock_mhz=list(t.sm_clock_mhz))  # fmt: skip


@dataclass
class VerdictRecord:
    verdict: VerdictKind  # base against head
    ratio: float | None = None  # head median / base median
    p_value: float | None = None  # of the base-vs-head test
    threshold: float | None = None  # the practical threshold it was judged with
    error: str | None = None  # what went wrong, when verdict is "error"


@dataclass
class CandidateRecord:
    source: str  # the full drop-in source file
    origin: str  # rule id ("fuse-gelu") or model name ("gpt-4o")
    status: str  # harness status of its evaluation
    reward: Literal[-1, 1, 2, 3]  # -1 wrong, 1 correct, 2 beats eager, 3 also beats torch.compile
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    precision_note: str | None = None  # e.g. "uses TF32 matmul"; None when precision is unchanged
    measurement: MeasurementRecord | None = None  # its evaluation (side "candidate")
    wall_s: float | None = None  # seconds its verification and timing took (None: stored before 0004)

    @property
    def source_sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()


@dataclass
class TurnRecord:
    turn_index: int  # position in the transcript, from 0
    role: str  # "system", "user", "assistant", "tool"
    content: str  # the message text
    tool_name: str | None = None  # the tool called or answering
    tool_args: Any = None  # JSON-able arguments of the call
    tool_result: Any = None  # JSON-able result
    tokens_in: int = 0  # prompt tokens billed for this turn
    tokens_out: int = 0  # completion tokens
    cost_usd: float = 0.0
    elapsed_s: float = 0.0  # wall time of the turn
    candidate: int | None = None  # index into the operator's candidates of the one this turn produced


@dataclass
class OperatorRecord:
    name: str  # "ops/gelu" or the declared name
    path: str  # defining file, relative to the repository root
    spec_hash: str  # OperatorSpec.spec_hash of the head version (of base when removed)
    change: Change  # how the pull request changed it
    base_spec_hash: str | None = None  # of the base version when it differs; base measurements link to it
    measurements: list[MeasurementRecord] = field(default_factory=list)  # base/head/eager/compile
    verdict: VerdictRecord | None = None  # None: not judged (optimize-only runs)
    candidates: list[CandidateRecord] = field(default_factory=list)
    transcript: list[TurnRecord] = field(default_factory=list)  # the agent's turns
    facts: dict[str, Any] | None = None  # what the analysis found (for the learned policy); None: nothing


@dataclass
class RunRecord:
    repository: str  # "owner/name"
    trigger: Trigger  # what started the run
    head_sha: str | None  # the code under test (None: an uncommitted work tree)
    base_sha: str | None = None  # what it is compared with
    pr_number: int | None = None
    runner: str = ""  # the runner's name
    status: RunStatus = "completed"
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))  # timezone-aware
    finished_at: datetime | None = None
    error: str | None = None  # why the run failed, naming the failed step
    fingerprint: FingerprintRecord | None = None  # where it ran
    operators: list[OperatorRecord] = field(default_factory=list)
    report: dict[str, Any] | None = None  # the run's result JSON as written (a review's to_json())


@dataclass
class HistoryPoint:
    """One measurement of an operator, for trend reports (oldest first)."""

    run_id: int  # the run it came from
    started_at: datetime  # when that run started
    commit_sha: str | None  # the code measured
    pr_number: int | None
    side: str  # one of Side
    spec_hash: str  # the operator version measured
    fingerprint_key: str | None
    status: str
    median_ms: float | None
    ci95_low_ms: float | None
    ci95_high_ms: float | None


@dataclass
class TrendPoint:
    """One measurement with everything the trend report and `kernelbot history` group it by."""

    repository: str  # "owner/name"
    operator: str  # operator name (a rename is a new name)
    spec_hash: str  # the operator version measured
    fingerprint_key: str | None  # series are never mixed across keys
    gpu: str | None  # the fingerprint's GPU model ("cpu" for CPU runs), for labels
    run_id: int
    trigger: str  # one of Trigger
    started_at: datetime  # when the run started
    commit_sha: str | None  # the code measured
    pr_number: int | None  # the run's pull request
    side: str  # one of Side
    status: str  # harness status
    median_ms: float | None
    ci95_low_ms: float | None
    ci95_high_ms: float | None


@dataclass
class RunSummary:
    """A run without its operators, for reports."""

    run_id: int
    repository: str
    trigger: str  # one of Trigger
    status: str  # one of RunStatus
    started_at: datetime
    head_sha: str | None
    pr_number: int | None
    runner: str
    error: str | None  # why it failed, naming the step
    gpu: str | None  # of the run's fingerprint


@dataclass
class VerdictSummary:
    """One base-against-head verdict with its run's commits, for reports."""

    run_id: int
    repository: str
    operator: str
    started_at: datetime
    trigger: str
    pr_number: int | None
    head_sha: str | None
    base_sha: str | None
    fingerprint_key: str | None  # of the run
    verdict: str | None  # one of VerdictKind, None when not judged
    ratio: float | None  # head / base
    change: str  # one of Change: how the run's revisions changed the operator (added, removed, ...)


@dataclass
class CandidateSummary:
    """One agent candidate with its run, for reports."""

    run_id: int
    repository: str
    operator: str
    started_at: datetime
    pr_number: int | None
    head_sha: str | None
    fingerprint_key: str | None  # of its measurement, else of the run
    origin: str  # rule id or model name
    status: str
    reward: int  # -1, 1, 2, 3
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None


def fields_of(source: Any, names: Sequence[str]) -> dict[str, Any]:
    """The named attributes of a record or a row, as keyword arguments for the other."""
    return {name: getattr(source, name) for name in names}
