"""Storage-layer queries for exports: which runs hold agent transcripts, oldest first."""

# NOTE: a storage module (with history and history_models): one of the few places that speak SQL.

from __future__ import annotations

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
