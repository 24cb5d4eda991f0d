"""The history database's schema: tables as SQLAlchemy 2.0 typed models, engines, Alembic migrations."""

# NOTE: only the storage layer (this module, kernelbot/history/, storage/) imports SQLAlchemy.
# NOTE: a change here needs a new revision in storage/versions/; tests/test_history.py checks they agree.

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    text,
)
from sqlalchemy.engine import Dialect, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from kernelbot.errors import StorageError

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on the way in and out (SQLite keeps no zone; PostgreSQL keeps timestamptz)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware time (datetime.now(UTC))")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# Named constraints, so a later revision can drop or alter them by name on every backend.
NAMING = {
    "pk": "pk_%(table_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def _fk(target: str, *, nullable: bool = False, cascade: bool = False) -> Mapped[Any]:
    return mapped_column(ForeignKey(target, ondelete="CASCADE" if cascade else None), nullable=nullable)


class Repository(Base):
    __tablename__ = "repositories"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)  # "owner/name"


class Commit(Base):
    __tablename__ = "commits"
    __table_args__ = (UniqueConstraint("repository_id", "sha"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = _fk("repositories.id")
    sha: Mapped[str] = mapped_column(String(64))


class Fingerprint(Base):
    """The software and hardware a measurement was taken on; measurements compare only within one key."""

    __tablename__ = "fingerprints"
    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 of the canonical JSON payload
    gpu: Mapped[str] = mapped_column(String(200))
    driver: Mapped[str] = mapped_column(String(64))
    cuda: Mapped[str] = mapped_column(String(64))
    torch: Mapped[str] = mapped_column(String(64))
    cupy: Mapped[str] = mapped_column(String(64))
    kernelbot: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)  # the full fingerprint, extras included
    schema_version: Mapped[int] = mapped_column(Integer)


class Operator(Base):
    """One version of an operator: a new spec hash (its code changed) is a new row."""

    __tablename__ = "operators"
    __table_args__ = (UniqueConstraint("repository_id", "name", "spec_hash"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = _fk("repositories.id")
    name: Mapped[str] = mapped_column(String(300))
    path: Mapped[str] = mapped_column(String(500))
    spec_hash: Mapped[str] = mapped_column(String(64))


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_repository_started", "repository_id", "started_at"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = _fk("repositories.id")
    trigger: Mapped[str] = mapped_column(String(32))
    pr_number: Mapped[int | None] = mapped_column(Integer)
    base_commit_id: Mapped[int | None] = _fk("commits.id", nullable=True)
    head_commit_id: Mapped[int | None] = _fk("commits.id", nullable=True)
    runner: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    error: Mapped[str | None] = mapped_column(Text)
    fingerprint_id: Mapped[int | None] = _fk("fingerprints.id", nullable=True)
    schema_version: Mapped[int] = mapped_column(Integer)  # of the record format (history.SCHEMA_VERSION)
    # The review JSON as the run wrote it (its own schema_version inside): re-posts render from it.
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # revision 0003


class Verdict(Base):
    """One operator in one run: how it changed and what base against head concluded."""

    __tablename__ = "verdicts"
    __table_args__ = (UniqueConstraint("run_id", "operator_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = _fk("runs.id", cascade=True)
    operator_id: Mapped[int] = _fk("operators.id")
    base_operator_id: Mapped[int | None] = _fk("operators.id", nullable=True)  # base version if it differs
    change: Mapped[str] = mapped_column(String(16))
    verdict: Mapped[str | None] = mapped_column(String(16))  # None: not judged (an optimize-only run)
    ratio: Mapped[float | None] = mapped_column(Float)
    p_value: Mapped[float | None] = mapped_column(Float)
    threshold: Mapped[float | None] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)
    # What the operator's analysis found (ops, modules, shapes, timings), for the learned search policy.
    facts: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # revision 0004


class Candidate(Base):
    __tablename__ = "candidates"
    __table_args__ = (
        Index("ix_candidates_operator_reward", "operator_id", "reward"),
        Index("ix_candidates_run_id", "run_id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = _fk("runs.id", cascade=True)
    operator_id: Mapped[int] = _fk("operators.id")
    source_sha256: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(Text)
    origin: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(32))
    reward: Mapped[int] = mapped_column(Integer)
    speedup_vs_eager: Mapped[float | None] = mapped_column(Float)
    speedup_vs_compile: Mapped[float | None] = mapped_column(Float)
    precision_note: Mapped[str | None] = mapped_column(Text)  # revision 0002
    wall_s: Mapped[float | None] = mapped_column(Float)  # its evaluation, start to end (revision 0004)


class Measurement(Base):
    __tablename__ = "measurements"
    __table_args__ = (
        Index("ix_measurements_operator_fingerprint", "operator_id", "fingerprint_id"),
        Index("ix_measurements_run_id", "run_id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = _fk("runs.id", cascade=True)
    operator_id: Mapped[int] = _fk("operators.id")
    commit_id: Mapped[int | None] = _fk("commits.id", nullable=True)  # the code measured (base or head)
    candidate_id: Mapped[int | None] = _fk("candidates.id", nullable=True, cascade=True)
    fingerprint_id: Mapped[int | None] = _fk("fingerprints.id", nullable=True)
    side: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text)
    max_abs_err: Mapped[float | None] = mapped_column(Float)
    max_rel_err: Mapped[float | None] = mapped_column(Float)
    median_ms: Mapped[float | None] = mapped_column(Float)
    mean_ms: Mapped[float | None] = mapped_column(Float)
    std_ms: Mapped[float | None] = mapped_column(Float)
    ci95_low_ms: Mapped[float | None] = mapped_column(Float)
    ci95_high_ms: Mapped[float | None] = mapped_column(Float)
    samples: Mapped[int] = mapped_column(Integer)
    calls_per_sample: Mapped[int] = mapped_column(Integer)
    stopped_by: Mapped[str] = mapped_column(String(32))
    raw_ms: Mapped[list[float]] = mapped_column(JSON)  # every sample, in the order taken
    sm_clock_mhz: Mapped[list[int | None]] = mapped_column(JSON)


class AgentTurn(Base):
    """One turn of an agent's transcript (revision 0002)."""

    __tablename__ = "agent_turns"
    __table_args__ = (Index("ix_agent_turns_run_operator", "run_id", "operator_id", "turn_index"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = _fk("runs.id", cascade=True)
    operator_id: Mapped[int] = _fk("operators.id")
    candidate_id: Mapped[int | None] = _fk("candidates.id", nullable=True, cascade=True)
    turn_index: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(32))
    content: Mapped[str] = mapped_column(Text)
    tool_name: Mapped[str | None] = mapped_column(String(200))
    tool_args: Mapped[Any] = mapped_column(JSON, nullable=True)
    tool_result: Mapped[Any] = mapped_column(JSON, nullable=True)
    tokens_in: Mapped[int] = mapped_column(Integer)
    tokens_out: Mapped[int] = mapped_column(Integer)
    cost_usd: Mapped[float] = mapped_column(Float)
    elapsed_s: Mapped[float] = mapped_column(Float)
    schema_version: Mapped[int] = mapped_column(Integer)  # of tool_args/tool_result JSON


# -- engines and migrations ----------------------------------------------------------------------


def storage_dir() -> Path:
    """Where the Alembic revisions live: the repository's storage/ (kernelbot/assets/storage in a wheel)."""
    from kernelbot.assets import asset_dir

    return asset_dir("storage")


def default_url() -> str:
    """The embedded SQLite file in the user's data directory."""
    import platformdirs

    return f"sqlite:///{Path(platformdirs.user_data_dir('kernelbot')) / 'history.db'}"


def normalize(url: str) -> str:
    """A SQLAlchemy URL, or a file path (an SQLite database there, e.g. `--db /tmp/x.db`)."""
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser().resolve()}"
    # Plain postgresql:// would pick psycopg2; kernelbot ships psycopg 3.
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def sqlite_path(url: str) -> Path | None:
    """The file of an SQLite URL (None for other databases and in-memory SQLite)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if not parsed.drivername.startswith("sqlite") or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def mask(url: str) -> str:
    """The URL with its password replaced, safe to print."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparsable database URL>"


def one_line(err: BaseException) -> str:
    """The first line of a driver's message (psycopg adds detail lines; tracebacks stay out)."""
    orig = getattr(err, "orig", None) or err
    lines = [line.strip() for line in str(orig).splitlines() if line.strip()]
    return lines[0] if lines else type(orig).__name__


def make_engine(url: str) -> Engine:
    """An engine for concurrent writers: SQLite queues on its lock (WAL, BEGIN IMMEDIATE); PostgreSQL pings."""
    try:
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                try:
                    Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
                except OSError as err:
                    raise StorageError(f"cannot create history database {mask(url)}: {err.strerror}") from err
            engine = create_engine(parsed, connect_args={"timeout": 60})
            event.listen(engine, "connect", _sqlite_connect)
            # BEGIN IMMEDIATE takes the write lock up front, so writers wait on the busy timeout
            # instead of failing when a read transaction cannot be upgraded to a write.
            event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
            return engine
        args = {"connect_timeout": 10} if parsed.get_backend_name() == "postgresql" else {}
        return create_engine(parsed, pool_pre_ping=True, connect_args=args)
    except (ArgumentError, NoSuchModuleError, ImportError) as err:
        raise StorageError(f"cannot use history database {mask(url)}: {one_line(err)}") from err


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # the begin event emits BEGIN itself
    cur = dbapi_conn.cursor()
    for pragma in ("busy_timeout = 60000", "journal_mode = WAL", "synchronous = NORMAL", "foreign_keys = ON"):
        cur.execute(f"PRAGMA {pragma}")
    cur.close()


def alembic_config() -> AlembicConfig:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(storage_dir()))
    return cfg


def migrate(engine: Engine, revision: str = "head", *, down: bool = False) -> None:
    """Upgrade (or downgrade) to `revision` in one transaction; concurrent migrators wait for each other."""
    from alembic import command

    cfg = alembic_config()
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(7170736)"))  # arbitrary lock id: "kb"
            cfg.attributes["connection"] = conn
            (command.downgrade if down else command.upgrade)(cfg, revision)
    except OperationalError as err:
        raise StorageError(f"cannot reach history database {mask(str(engine.url))}: {one_line(err)}") from err


def revisions(engine: Engine) -> tuple[str | None, str, set[str]]:
    """(the database's revision or None, this kernelbot's head, every revision this kernelbot knows)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    head = script.get_current_head()
    assert head is not None, "storage/versions has no revisions"
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    return current, head, {s.revision for s in script.walk_revisions()}
