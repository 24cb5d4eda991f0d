"""Storage-layer queries for exports (which runs hold agent transcripts) and for fleet plans (operators'
recorded wall times)."""

# NOTE: a storage module (with history and history_models): one of the few places that speak SQL.

from __future__ import annotations

import statistics
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import exists, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from kernelbot.errors import StorageError
from kernelbot.history import History
from kernelbot.history import models as db
from kernelbot.history.models import AgentTurn, Run


def runs_with_transcripts(history: History, since: datetime | None = None) -> list[int]:
    """Ids of the runs that stored at least one agent turn, started at or after `since` (timezone-aware)."""
    query = select(Run.id).where(exists().where(AgentTurn.run_id == Run.id)).order_by(Run.started_at, Run.id)
    if since is not None:
        query = query.where(Run.started_at >= since)
    try:
        with Session(history.engine) as session:
            return [int(run_id) for run_id in session.scalars(query)]
    except DBAPIError as err:
        raise StorageError(
            f"history database {db.mask(str(history.engine.url))}: {db.one_line(err)}"
        ) from err


def operator_costs(
    history: History, repository: str, names: Iterable[str], runs: int = 20
) -> dict[str, float]:
    """Each named operator's median wall time (measuring and optimizing it) over the `runs` latest
    completed runs of `repository` that reported it; operators never reported are left out."""
    wanted = set(names)
    query = (
        select(Run.report)
        .join(db.Repository, Run.repository_id == db.Repository.id)
        .where(db.Repository.name == repository, Run.status == "completed", Run.report.is_not(None))
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(200)
    )
    seen: dict[str, list[float]] = {}
    try:
        with Session(history.engine) as session:
            for report in session.scalars(query):
                for op in (report or {}).get("operators") or []:
                    wall, name = op.get("wall_s"), op.get("name")
                    walls = seen.setdefault(name, []) if name in wanted else []
                    if name in wanted and isinstance(wall, int | float) and wall > 0 and len(walls) < runs:
                        walls.append(float(wall))
    except DBAPIError as err:
        raise StorageError(
            f"history database {db.mask(str(history.engine.url))}: {db.one_line(err)}"
        ) from err
    return {name: statistics.median(walls) for name, walls in seen.items() if walls}
