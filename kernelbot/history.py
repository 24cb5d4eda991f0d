"""The history database: typed records in, one transaction per run, records back out for publish and trends."""

# NOTE: the only SQL-speaking module (with history_models and storage/). Callers pass and get plain
# dataclasses; nothing here connects or migrates until History.open is called.

from __future__ import annotations

import hashlib
import importlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast, get_args

from sqlalchemy import Engine, func, insert, select
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session, aliased

from kernelbot import history_models as db
from kernelbot.errors import StorageError
from kernelbot.history_models import (
    AgentTurn,
    Candidate,
    Commit,
    Fingerprint,
    Measurement,
    Operator,
    Repository,
    Run,
    Verdict,
)

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
        record = cls(cast(Side, side), **_copy(ev, ("status", "reason", "max_abs_err", "max_rel_err")))
        if (t := ev.timing) is None:
            return record
        timing = _copy(t, ("median_ms", "mean_ms", "std_ms", "samples", "calls_per_sample", "stopped_by"))
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
        return self._transaction(lambda s: _write_run(s, record, record.status, record.operators))

    def start_run(self, record: RunRecord) -> int:
        """The run alone, status "running" (its operators are ignored): then add_operator and finish_run,
        so a run that fails halfway keeps what it measured."""
        return self._transaction(lambda s: _write_run(s, record, "running", []))

    def add_operator(self, run_id: int, op: OperatorRecord) -> None:
        """One operator's results, in their own transaction."""

        def work(session: Session) -> None:
            run = session.get(Run, run_id)
            if run is None:
                raise StorageError(f"no run {run_id} in the history database")
            _write_operators(session, run, [op])

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
        return self._transaction(lambda session: _read_run(session, run_id))

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
                             **_copy(m, ("status", "median_ms", "ci95_low_ms", "ci95_high_ms")))
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
            .where(*_window(Run.started_at, since, until))
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
            .where(*_window(Run.started_at, since, until))
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
            .where(Candidate.reward >= min_reward, *_window(Run.started_at, since, until))
            .order_by(Run.started_at, Run.id, Candidate.id)
        )

        def work(session: Session) -> list[CandidateSummary]:
            return [
                CandidateSummary(run.id, repo, name, run.started_at, run.pr_number, sha, cand_key or run_key,
                                 **_copy(c, ("origin", "status", "reward", "speedup_vs_eager",
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


# -- rows from records, records from rows -------------------------------------------------------

_FINGERPRINT = ("gpu", "driver", "cuda", "torch", "cupy", "kernelbot")
_VERDICT = ("verdict", "ratio", "p_value", "threshold", "error")
_CANDIDATE = tuple(f for f in CandidateRecord.__dataclass_fields__ if f != "measurement")
_TURN = tuple(f for f in TurnRecord.__dataclass_fields__ if f != "candidate")
_MEASUREMENT = tuple(f for f in MeasurementRecord.__dataclass_fields__ if f != "fingerprint")


def _window(column: Any, since: datetime | None, until: datetime | None) -> list[Any]:
    """WHERE clauses for since <= column < until, either end open."""
    return [
        c for c in (column >= since if since else None, column < until if until else None) if c is not None
    ]


def _copy(source: Any, names: Sequence[str]) -> dict[str, Any]:
    return {name: getattr(source, name) for name in names}


def _id_for(session: Session, model: type[db.Base], keys: Sequence[str], **values: Any) -> int:
    """The id of the row with these key values, inserted if missing; safe against concurrent writers."""
    table: Any = model.__table__
    where = [table.c[k] == values[k] for k in keys]
    found = session.scalar(select(table.c.id).where(*where))
    if found is not None:
        return int(found)
    dialect = session.get_bind().dialect.name
    if dialect in ("postgresql", "sqlite"):
        # A concurrent writer's uncommitted row makes this wait for its commit, then do nothing.
        upsert = importlib.import_module(f"sqlalchemy.dialects.{dialect}").insert(table).values(**values)
        session.execute(upsert.on_conflict_do_nothing(index_elements=list(keys)))
    else:
        try:
            with session.begin_nested():
                session.execute(insert(table).values(**values))
        except IntegrityError:
            pass
    return int(session.scalars(select(table.c.id).where(*where)).one())


def _fingerprint_id(session: Session, fp: FingerprintRecord) -> int:
    values = _copy(fp, _FINGERPRINT)
    return _id_for(
        session, Fingerprint, ["key"], key=fp.key, payload=asdict(fp), schema_version=SCHEMA_VERSION, **values
    )


def _write_run(session: Session, record: RunRecord, status: str, operators: list[OperatorRecord]) -> int:
    repo_id = _id_for(session, Repository, ["name"], name=record.repository)
    fp_id = _fingerprint_id(session, record.fingerprint) if record.fingerprint else None
    # Shared rows are taken in one global order (sorted keys), so two writers never wait on each other in a cycle.
    shas = sorted({sha for sha in (record.base_sha, record.head_sha) if sha})
    commits = {
        sha: _id_for(session, Commit, ["repository_id", "sha"], repository_id=repo_id, sha=sha)
        for sha in shas
    }
    run = Run(repository_id=repo_id, status=status, fingerprint_id=fp_id, schema_version=SCHEMA_VERSION,
              base_commit_id=commits.get(record.base_sha or ""), head_commit_id=commits.get(record.head_sha or ""),
              **_copy(record, ("trigger", "pr_number", "runner", "started_at", "finished_at", "error", "report")))  # fmt: skip
    session.add(run)
    session.flush()
    _write_operators(session, run, operators)
    return run.id


def _write_operators(session: Session, run: Run, operators: list[OperatorRecord]) -> None:
    measured = [m for op in operators for m in op.measurements + [c.measurement for c in op.candidates]]
    fps = {m.fingerprint.key: m.fingerprint for m in measured if m and m.fingerprint}
    fp_ids = {key: _fingerprint_id(session, fps[key]) for key in sorted(fps)}
    paths = {
        (op.name, h): op.path for op in operators for h in (op.spec_hash, op.base_spec_hash) if h is not None
    }
    keys = ["repository_id", "name", "spec_hash"]
    op_ids = {
        (name, h): _id_for(session, Operator, keys, repository_id=run.repository_id, name=name, spec_hash=h,
                           path=paths[(name, h)])
        for name, h in sorted(paths)
    }  # fmt: skip

    def add_measurement(
        m: MeasurementRecord, op_id: int, commit_id: int | None, candidate_id: int | None
    ) -> None:
        fp_id = fp_ids[m.fingerprint.key] if m.fingerprint else run.fingerprint_id
        ids = {"run_id": run.id, "operator_id": op_id, "commit_id": commit_id, "candidate_id": candidate_id}
        session.add(Measurement(**ids, fingerprint_id=fp_id, **_copy(m, _MEASUREMENT)))

    for op in operators:
        head_id = op_ids[(op.name, op.spec_hash)]
        base_id = op_ids[(op.name, op.base_spec_hash)] if op.base_spec_hash is not None else None
        verdict = _copy(op.verdict, _VERDICT) if op.verdict else {}
        session.add(
            Verdict(run_id=run.id, operator_id=head_id, base_operator_id=base_id, change=op.change, **verdict)
        )
        for m in op.measurements:
            if m.side == "base":
                add_measurement(m, base_id or head_id, run.base_commit_id, None)
            else:
                add_measurement(m, head_id, run.head_commit_id, None)
        candidate_ids: list[int] = []
        for c in op.candidates:
            row = Candidate(
                run_id=run.id, operator_id=head_id, source_sha256=c.source_sha256, **_copy(c, _CANDIDATE)
            )
            session.add(row)
            session.flush()
            candidate_ids.append(row.id)
            if c.measurement is not None:
                add_measurement(c.measurement, head_id, run.head_commit_id, row.id)
        for t in op.transcript:
            candidate_id = candidate_ids[t.candidate] if t.candidate is not None else None
            ids = {"run_id": run.id, "operator_id": head_id, "candidate_id": candidate_id}
            session.add(AgentTurn(**ids, schema_version=SCHEMA_VERSION, **_copy(t, _TURN)))
    session.flush()


def _read_run(session: Session, run_id: int) -> RunRecord:
    run = session.get(Run, run_id)
    if run is None:
        raise StorageError(f"no run {run_id} in the history database")

    def rows(model: Any, *order: Any) -> Sequence[Any]:
        return session.scalars(select(model).where(model.run_id == run_id).order_by(*order, model.id)).all()

    verdicts, measurements = rows(Verdict), rows(Measurement)
    candidates, turns = rows(Candidate), rows(AgentTurn, AgentTurn.operator_id, AgentTurn.turn_index)
    op_ids = {v.operator_id for v in verdicts} | {v.base_operator_id for v in verdicts if v.base_operator_id}
    ops = {o.id: o for o in session.scalars(select(Operator).where(Operator.id.in_(op_ids)))}
    fp_ids = {m.fingerprint_id for m in measurements} | {run.fingerprint_id}
    fps = {
        f.id: FingerprintRecord(**f.payload)
        for f in session.scalars(select(Fingerprint).where(Fingerprint.id.in_(fp_ids)))
    }
    shas = {
        c.id: c.sha
        for c in session.scalars(
            select(Commit).where(Commit.id.in_([run.base_commit_id, run.head_commit_id]))
        )
    }

    def measurement(m: Measurement) -> MeasurementRecord:
        fp = None if m.fingerprint_id in (None, run.fingerprint_id) else fps[m.fingerprint_id]
        return MeasurementRecord(**_copy(m, _MEASUREMENT), fingerprint=fp)

    by_op: dict[int, OperatorRecord] = {}  # head and base operator ids -> the run's record of that operator
    for v in verdicts:
        op = ops[v.operator_id]
        verdict = VerdictRecord(**_copy(v, _VERDICT)) if v.verdict is not None else None
        base_hash = ops[v.base_operator_id].spec_hash if v.base_operator_id else None
        record = OperatorRecord(op.name, op.path, op.spec_hash, v.change, base_hash, verdict=verdict)
        by_op[v.operator_id] = by_op[v.base_operator_id or v.operator_id] = record
    by_candidate: dict[int, CandidateRecord] = {}
    position: dict[int, int] = {}
    for c in candidates:
        owner = by_op[c.operator_id].candidates
        position[c.id] = len(owner)
        owner.append(by_candidate.setdefault(c.id, CandidateRecord(**_copy(c, _CANDIDATE))))
    for m in measurements:
        if m.candidate_id is not None:
            by_candidate[m.candidate_id].measurement = measurement(m)
        else:
            by_op[m.operator_id].measurements.append(measurement(m))
    for t in turns:
        candidate = position[t.candidate_id] if t.candidate_id is not None else None
        by_op[t.operator_id].transcript.append(TurnRecord(**_copy(t, _TURN), candidate=candidate))
    return RunRecord(
        repository=session.get_one(Repository, run.repository_id).name,
        head_sha=shas.get(run.head_commit_id or -1),
        base_sha=shas.get(run.base_commit_id or -1),
        fingerprint=fps.get(run.fingerprint_id or -1),
        operators=list({id(r): r for r in by_op.values()}.values()),
        **_copy(
            run, ("trigger", "pr_number", "runner", "status", "started_at", "finished_at", "error", "report")
        ),
    )
