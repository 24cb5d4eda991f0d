"""Storage-layer queries for the learned search policy and the search agent's trajectories: every stored
candidate with its operator's facts, and which runs the search agent made."""

# NOTE: a storage module (with history and history_models): one of the few places that speak SQL.

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import and_, exists, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from kernelbot.errors import StorageError
from kernelbot.history import History
from kernelbot.history import models as db
from kernelbot.history.models import (
    AgentTurn,
    Candidate,
    Fingerprint,
    Measurement,
    Operator,
    Repository,
    Run,
    Verdict,
)

T = TypeVar("T")


@dataclass
class CandidateOutcome:
    """One stored candidate with what the learned search policy needs of its run and operator."""

    run_id: int
    repository: str  # "owner/name"
    operator: str  # the operator's name
    candidate_id: int  # increasing in the order candidates were evaluated, within a run
    origin: str  # rule id ("a+b" for a stack), model name or replay file
    status: str  # harness status
    reward: int  # -1 / 1 / 2 / 3
    speedup_vs_eager: float | None
    wall_s: float | None  # its evaluation's seconds (None: stored before revision 0004)
    facts: dict[str, Any] | None  # the operator's analysis facts in that run (None: before 0004)
    gpu: str | None  # the run's fingerprint's GPU model ("cpu" on CPUs)
    reason: str = ""  # its evaluation's reason (e.g. that the run's time limit cut it)


def _read(history: History, work: Callable[[Session], T]) -> T:
    try:
        with Session(history.engine) as session:
            return work(session)
    except DBAPIError as err:
        raise StorageError(
            f"history database {db.mask(str(history.engine.url))}: {db.one_line(err)}"
        ) from err


def runs_with_search(history: History, since: datetime | None = None) -> list[int]:
    """Ids of the runs that stored candidates and no agent turn (the search agent's), oldest first."""
    query = (
        select(Run.id)
        .where(exists().where(Candidate.run_id == Run.id), ~exists().where(AgentTurn.run_id == Run.id))
        .order_by(Run.started_at, Run.id)
    )
    if since is not None:
        query = query.where(Run.started_at >= since)
    return _read(history, lambda session: [int(run_id) for run_id in session.scalars(query)])


def candidate_outcomes(history: History) -> list[CandidateOutcome]:
    """Every stored candidate with its operator's facts and the run's GPU, in the order evaluated."""
    query = (
        select(
            Candidate,
            Run.id,
            Repository.name,
            Operator.name,
            Verdict.facts,
            Fingerprint.gpu,
            Measurement.reason,
        )
        .join(Run, Candidate.run_id == Run.id)
        .join(Operator, Candidate.operator_id == Operator.id)
        .join(Repository, Operator.repository_id == Repository.id)
        .outerjoin(Verdict, and_(Verdict.run_id == Run.id, Verdict.operator_id == Operator.id))
        .outerjoin(Fingerprint, Run.fingerprint_id == Fingerprint.id)
        .outerjoin(Measurement, Measurement.candidate_id == Candidate.id)
        .order_by(Run.started_at, Run.id, Candidate.id)
    )

    def work(session: Session) -> list[CandidateOutcome]:
        return [
            CandidateOutcome(run_id, repo, name, c.id, c.origin, c.status, c.reward, c.speedup_vs_eager,
                             c.wall_s, facts, gpu, reason or "")
            for c, run_id, repo, name, facts, gpu, reason in session.execute(query)
        ]  # fmt: skip

    return _read(history, work)
