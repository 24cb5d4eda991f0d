"""The agent interface: a task in, proposals out, verified feedback back in (search, llm and replay agents)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from kernelbot.config import PrecisionPolicy
from kernelbot.harness.evaluate import Settings
from kernelbot.harness.results import Evaluation
from kernelbot.spec import OperatorSpec

# exact: IEEE float32 as the operator computes it; tf32 and bf16: lower precision, reported as such; tf32x3:
# float32 products emulated on TF32 Tensor Cores (three products), held to the operator's own tolerance.
Precision = Literal["exact", "tf32", "tf32x3", "bf16"]
PRECISIONS: tuple[Precision, ...] = ("exact", "tf32", "tf32x3", "bf16")
# A candidate that changes precision is checked against the full-precision reference at that precision's tolerance.
PRECISION_TOLERANCE = {"tf32": 1e-2, "bf16": 1e-2}


def precision_allowed(precision: str, policy: dict[str, bool]) -> bool:
    """Exact always; any other precision where the policy (PrecisionPolicy.model_dump()) says allow_<precision>."""
    return precision == "exact" or bool(policy.get(f"allow_{precision}", False))


def allowed_precisions(policy: PrecisionPolicy) -> tuple[Precision, ...]:
    """The candidate precisions a policy allows, in PRECISIONS order."""
    return tuple(p for p in PRECISIONS if precision_allowed(p, policy.model_dump()))


def job_at_precision(job: dict[str, Any], precision: Precision) -> dict[str, Any]:
    """The harness job for a candidate of `precision`: the reference stays pinned to full float32; only the
    candidate may switch inside its own calls, and it is compared at that precision's tolerance."""
    if precision == "exact":
        return job
    if precision not in PRECISION_TOLERANCE:  # tf32x3 claims float32 accuracy: the operator's own tolerance
        return {**job, "candidate_precision": precision}
    tol = PRECISION_TOLERANCE[precision]
    return {
        **job,
        "atol": max(job.get("atol") or 0, tol),
        "rtol": max(job.get("rtol") or 0, tol),
        "candidate_precision": precision,
    }


@dataclass
class Task:
    spec: OperatorSpec
    root: Path  # repository root the operator's paths are relative to
    device: str  # "cpu" or "cuda"
    source: str  # the operator file's text
    policy: PrecisionPolicy  # which precision changes a candidate may make
    facts: dict[str, Any] = field(
        default_factory=dict
    )  # what analysis found (graph ops, modules, shapes, eager time)
    budget: int = 8  # candidates to evaluate at most
    # The sandbox limits the pipeline judges with (an agent's own tools run under the same), and the
    # torch.compile baseline when it was measured: handed down so that agents never reach up into the pipeline.
    settings: Settings = field(default_factory=Settings)
    compiled: Evaluation | None = None
    deadline: float | None = None  # time.monotonic() when the operator's time ends (for the learned order)


@dataclass
class Proposal:
    source: str  # a drop-in file: defines ModelNew (KernelBench form) or the declared callable
    origin: str  # rule id, model name, or replay file name
    description: str  # one line: what it changes
    precision: Precision = (
        "exact"  # a lower precision is reported and checked with that precision's tolerance
    )
    require_kernel: bool = False  # the rule promises a custom kernel: falling back to library calls is a hack
    expected_gain: float = 1.0  # the agent's own guess, for ordering


@dataclass
class Feedback:
    proposal: Proposal
    evaluation: Evaluation  # status, reason, errors, timing
    reward: int  # -1 / 1 / 2 / 3
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None


class Agent(Protocol):
    """What the optimizer asks of an agent. The last three are optional in spirit: AgentBase gives each a
    default, so an agent with nothing to say about them need not mention them."""

    name: str
    skipped: dict[str, str]  # rule id -> why it did not apply (the report lists them)
    transcript: list[Any]  # its turns (history.TurnRecord), for the history database

    def propose(self, task: Task, feedback: Sequence[Feedback]) -> Proposal | None:
        """The next candidate, given what was verified so far; None when it has nothing more to try."""
        ...

    def summary(self) -> dict[str, Any]:
        """Its own account of the run (model, cost, why it stopped); {} when it has none."""
        ...


class AgentBase:
    """The optional parts of Agent, empty."""

    name = "agent"

    def __init__(self) -> None:
        self.skipped: dict[str, str] = {}
        self.transcript: list[Any] = []

    def summary(self) -> dict[str, Any]:
        return {}


class ReplayAgent(AgentBase):
    """Proposes the files it was given, in order (tests, and re-checking candidates from elsewhere)."""

    name = "replay"

    def __init__(self, files: Sequence[Path]) -> None:
        super().__init__()
        self.files = list(files)

    def propose(self, task: Task, feedback: Sequence[Feedback]) -> Proposal | None:
        if len(feedback) >= len(self.files):
            return None
        path = self.files[len(feedback)]
        return Proposal(path.read_text(), origin=f"replay:{path.name}", description=f"replayed from {path}")
