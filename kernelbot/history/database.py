"""The history database: one transaction per run in, records back out for publish and trends.

Nothing here connects or migrates until History.open is called."""

# NOTE: the only SQL-speaking module (with history_models and storage/). Callers pass and get plain
# dataclasses; nothing here connects or migrates until History.open is called.

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TypeVar

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, aliased

from kernelbot.errors import StorageError
from kernelbot.history import models as db
from kernelbot.history.models import (
    Candidate,
    Commit,
    Fingerprint,
    Measurement,
    Operator,
    Repository,
    Run,
    Verdict,
)
from kernelbot.history.records import (
    CandidateSummary,
    FingerprintRecord,
    HistoryPoint,
    OperatorRecord,
    RunRecord,
    RunStatus,
    RunSummary,
    Side,
    TrendPoint,
    VerdictSummary,
    fields_of,
)
from kernelbot.history.rows import read_run, window, write_operators, write_run

T = TypeVar("T")


@contextmanager
def _engine(url: str | None) -> Iterator[tuple[Engine, str]]:
    """A short-lived engine and the URL to print (password masked); driver errors become StorageError."""
    url = db.normalize(url) if url else db.default_url()
    engine = db.make_engine(url)
    try:
        yield engine, db.mask(url)
    except DBAPIError as err:
        raise StorageError(f"cannot reach history database {db.mask(url)}: {db.one_line(err)}") from err
    finally:
        engine.dispose()


def schema_status(url: str | None = None) -> tuple[str | None, str]:
    """(the database's schema revision, None when empty; the revision this kernelbot needs)."""
    with _engine(url) as (engine, _):
        current, head, _known = db.revisions(engine)
        return current, head


def upgrade(url: str | None = None, revision: str = "head") -> tuple[str | None, str | None]:
    """Upgrade the schema in place (any earlier revision to `revision`); returns (before, after)."""
    with _engine(url) as (engine, _):
        before = db.revisions(engine)[0]
        db.migrate(engine, revision)
        return before, db.revisions(engine)[0]


def downgrade(url: str | None, revision: str) -> None:
    """Downgrade the schema to `revision` ("base" drops every table); for tests and rollbacks."""
    with _engine(url) as (engine, _):
        db.migrate(engine, revision, down=True)


class History:
    """The repository API over one database; RunRecord says what a run holds."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(
        cls, url: str | None = None, *, auto_upgrade: bool | None = None, read_only: bool = False
    ) -> History:
        """Connect and check the schema. The default embedded SQLite file upgrades itself; an explicit
        URL at an older revision raises StorageError naming `kernelbot db upgrade` (unless auto_upgrade);
        an empty database gets the current schema. `read_only` (reports, queries): an SQLite file that does
        not exist is an error naming it, not a new empty database (a mistyped --db would look empty)."""
        if auto_upgrade is None:
            auto_upgrade = url is None
        if read_only and url is not None:
            path = db.sqlite_path(db.normalize(url))
            if path is not None and not path.exists():
                raise StorageError(
                    f"no history database at {path}: check --db, or run `kernelbot review` first to fill one"
                )
        with _engine(url) as (engine, shown):
            current, head, known = db.revisions(engine)
            if current != head:
                if current is not None and current not in known:
                    raise StorageError(
                        f"history database {shown} is at schema revision {current}, newer "
                        f"than this kernelbot knows ({head}): upgrade kernelbot"
                    )
                # A brand-new, empty database has nothing to protect: create the schema. An older one
                # holding data is upgraded only on purpose (or for the embedded default).
                if not auto_upgrade and current is not None:
                    raise StorageError(
                        f"history database {shown} is at schema revision {current or 'none'}, "
                        f"this kernelbot needs {head}: run `kernelbot db upgrade --db URL` with that URL"
                    )
                db.migrate(engine)
            return cls(engine)  # dispose() on leaving only empties the pool; the engine stays usable

    def close(self) -> None:
        self.engine.dispose()

    def _transaction(self, work: Callable[[Session], T]) -> T:
        """Run `work` in one transaction; driver errors become one-line StorageErrors."""
        for attempt in range(5):
            try:
                with Session(self.engine, expire_on_commit=False) as session, session.begin():
                    return work(session)
            except DBAPIError as err:
                # PostgreSQL may pick one of two writers as a deadlock (or serialization) victim: redo it all.
                retry = getattr(err.orig, "sqlstate", None) in ("40P01", "40001") and attempt < 4
                if not retry:
                    raise StorageError(
                        f"history database {db.mask(str(self.engine.url))}: {db.one_line(err)}"
                    ) from err
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    # -- writing ---------------------------------------------------------------------------------

    def record_run(self, record: RunRecord) -> int:
        """Everything about one run in one transaction; returns the run id."""
        return self._transaction(lambda s: write_run(s, record, record.status, record.operators))

    def start_run(self, record: RunRecord) -> int:
        """The run alone, status "running" (its operators are ignored): then add_operator and finish_run,
        so a run that fails halfway keeps what it measured."""
        return self._transaction(lambda s: write_run(s, record, "running", []))

    def add_operator(self, run_id: int, op: OperatorRecord) -> None:
        """One operator's results, in their own transaction."""

        def work(session: Session) -> None:
            run = session.get(Run, run_id)
            if run is None:
                raise StorageError(f"no run {run_id} in the history database")
            write_operators(session, run, [op])

        self._transaction(work)

    def finish_run(self, run_id: int, status: RunStatus, error: str | None = None) -> None:
        def work(session: Session) -> None:
            run = session.get(Run, run_id)
            if run is None:
                raise StorageError(f"no run {run_id} in the history database")
            run.status, run.error, run.finished_at = status, error, datetime.now(UTC)

        self._transaction(work)

    # -- reading ---------------------------------------------------------------------------------

    def get_run(self, run_id: int) -> RunRecord:
        """The run as it was recorded (to publish again from the database)."""
        return self._transaction(lambda session: read_run(session, run_id))

    def operator_history(
        self,
        repository: str,
        operator_name: str,
        fingerprint_key: str | None = None,
        sides: Sequence[Side] = ("base", "head"),
    ) -> list[HistoryPoint]:
        """Measurements of one operator across runs, oldest first; optionally on one fingerprint only."""
        commit, fp = aliased(Commit), aliased(Fingerprint)
        query = (
            select(Measurement, Run, Operator.spec_hash, commit.sha, fp.key)
            .join(Run, Measurement.run_id == Run.id)
            .join(Operator, Measurement.operator_id == Operator.id)
            .join(Repository, Operator.repository_id == Repository.id)
            .outerjoin(commit, Measurement.commit_id == commit.id)
            .outerjoin(fp, Measurement.fingerprint_id == fp.id)
            .where(Repository.name == repository, Operator.name == operator_name, Measurement.side.in_(sides))
            .order_by(Run.started_at, Run.id, Measurement.id)
        )
        if fingerprint_key is not None:
            query = query.where(fp.key == fingerprint_key)

        def work(session: Session) -> list[HistoryPoint]:
            return [
                HistoryPoint(run.id, run.started_at, sha, run.pr_number, m.side, spec_hash, key,
                             **fields_of(m, ("status", "median_ms", "ci95_low_ms", "ci95_high_ms")))
                for m, run, spec_hash, sha, key in session.execute(query)
            ]  # fmt: skip

        return self._transaction(work)

    def trend_points(
        self,
        repository: str | None = None,
        operator: str | None = None,
        sides: Sequence[Side] = ("base", "head"),
        until: datetime | None = None,
    ) -> list[TrendPoint]:
        """Measurements (not candidates) of every operator, oldest first, with run, commit and fingerprint."""
        commit, fp = aliased(Commit), aliased(Fingerprint)
        query = (
            select(
                Measurement,
                Run,
                Operator.name,
                Operator.spec_hash,
                Repository.name,
                commit.sha,
                fp.key,
                fp.gpu,
            )
            .join(Run, Measurement.run_id == Run.id)
            .join(Operator, Measurement.operator_id == Operator.id)
            .join(Repository, Operator.repository_id == Repository.id)
            .outerjoin(commit, Measurement.commit_id == commit.id)
            .outerjoin(fp, Measurement.fingerprint_id == fp.id)
            .where(Measurement.side.in_(sides), Measurement.candidate_id.is_(None))
            .order_by(Run.started_at, Run.id, Measurement.id)
        )
        if repository is not None:
            query = query.where(Repository.name == repository)
        if operator is not None:
            query = query.where(Operator.name == operator)
        if until is not None:
            query = query.where(Run.started_at < until)

        def work(session: Session) -> list[TrendPoint]:
            return [
                TrendPoint(repo, name, spec_hash, key, gpu, run.id, run.trigger, run.started_at, sha,
                           run.pr_number, m.side, m.status, m.median_ms, m.ci95_low_ms, m.ci95_high_ms)
                for m, run, name, spec_hash, repo, sha, key, gpu in session.execute(query)
            ]  # fmt: skip

        return self._transaction(work)

    def runs(self, since: datetime | None = None, until: datetime | None = None) -> list[RunSummary]:
        """Runs started in [since, until), oldest first."""
        head, fp = aliased(Commit), aliased(Fingerprint)
        query = (
            select(Run, Repository.name, head.sha, fp.gpu)
            .join(Repository, Run.repository_id == Repository.id)
            .outerjoin(head, Run.head_commit_id == head.id)
            .outerjoin(fp, Run.fingerprint_id == fp.id)
            .where(*window(Run.started_at, since, until))
            .order_by(Run.started_at, Run.id)
        )

        def work(session: Session) -> list[RunSummary]:
            return [
                RunSummary(run.id, repo, run.trigger, run.status, run.started_at, sha, run.pr_number,
                           run.runner, run.error, gpu)
                for run, repo, sha, gpu in session.execute(query)
            ]  # fmt: skip

        return self._transaction(work)

    def verdicts(self, since: datetime | None = None, until: datetime | None = None) -> list[VerdictSummary]:
        """Verdicts of runs started in [since, until), oldest first."""
        head, base, fp = aliased(Commit), aliased(Commit), aliased(Fingerprint)
        query = (
            select(Verdict, Run, Operator.name, Repository.name, head.sha, base.sha, fp.key)
            .join(Run, Verdict.run_id == Run.id)
            .join(Operator, Verdict.operator_id == Operator.id)
            .join(Repository, Run.repository_id == Repository.id)
            .outerjoin(head, Run.head_commit_id == head.id)
            .outerjoin(base, Run.base_commit_id == base.id)
            .outerjoin(fp, Run.fingerprint_id == fp.id)
            .where(*window(Run.started_at, since, until))
            .order_by(Run.started_at, Run.id, Verdict.id)
        )

        def work(session: Session) -> list[VerdictSummary]:
            return [
                VerdictSummary(run.id, repo, name, run.started_at, run.trigger, run.pr_number, head_sha,
                               base_sha, key, v.verdict, v.ratio, v.change)
                for v, run, name, repo, head_sha, base_sha, key in session.execute(query)
            ]  # fmt: skip

        return self._transaction(work)

    def candidates(
        self, since: datetime | None = None, until: datetime | None = None, min_reward: int = -1
    ) -> list[CandidateSummary]:
        """Agent candidates of runs started in [since, until) with at least `min_reward`, oldest first."""
        head, run_fp, cand_fp = aliased(Commit), aliased(Fingerprint), aliased(Fingerprint)
        query = (
            select(Candidate, Run, Operator.name, Repository.name, head.sha, run_fp.key, cand_fp.key)
            .join(Run, Candidate.run_id == Run.id)
            .join(Operator, Candidate.operator_id == Operator.id)
            .join(Repository, Run.repository_id == Repository.id)
            .outerjoin(head, Run.head_commit_id == head.id)
            .outerjoin(run_fp, Run.fingerprint_id == run_fp.id)
            .outerjoin(Measurement, Measurement.candidate_id == Candidate.id)
            .outerjoin(cand_fp, Measurement.fingerprint_id == cand_fp.id)
            .where(Candidate.reward >= min_reward, *window(Run.started_at, since, until))
            .order_by(Run.started_at, Run.id, Candidate.id)
        )

        def work(session: Session) -> list[CandidateSummary]:
            return [
                CandidateSummary(run.id, repo, name, run.started_at, run.pr_number, sha, cand_key or run_key,
                                 **fields_of(c, ("origin", "status", "reward", "speedup_vs_eager",
                                             "speedup_vs_compile")))
                for c, run, name, repo, sha, run_key, cand_key in session.execute(query)
            ]  # fmt: skip

        return self._transaction(work)

    def fingerprints(self) -> dict[str, FingerprintRecord]:
        """Every fingerprint by key, as recorded."""

        def work(session: Session) -> dict[str, FingerprintRecord]:
            return {f.key: FingerprintRecord(**f.payload) for f in session.scalars(select(Fingerprint))}

        return self._transaction(work)

    def count(self, table: str) -> int:
        """Rows in one table, by table name."""
        model = next(m for m in db.Base.registry.mappers if m.class_.__tablename__ == table).class_
        return self._transaction(lambda session: session.scalar(select(func.count()).select_from(model)) or 0)
