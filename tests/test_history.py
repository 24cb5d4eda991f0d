"""The history database on a real SQLite file and a real PostgreSQL server: migrations, round trips, concurrency."""

from __future__ import annotations

import argparse
import multiprocessing
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from kernelbot import history
from kernelbot.commands import db as db_command
from kernelbot.errors import StorageError
from kernelbot.history import (
    CandidateRecord,
    FingerprintRecord,
    History,
    MeasurementRecord,
    OperatorRecord,
    RunRecord,
    TurnRecord,
    VerdictRecord,
)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
H100 = FingerprintRecord(
    gpu="NVIDIA H100 80GB HBM3", driver="550.54", cuda="12.4", torch="2.4.0", kernelbot="0.1.0"
)
# Floats whose text form is easy to get wrong: shortest repr, subnormal, extremes, negative zero.
TRICKY = [0.1, 1 / 3, 2.0000000000000004, 5e-324, 1.7976931348623157e308, 123456.78901234567, -0.0, 1e-7]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.db'}"
    return str(request.getfixturevalue("postgres_url"))


def sample_run(
    sha: str = "b" * 40,
    *,
    started: datetime = T0,
    repo: str = "acme/kernels",
    tag: str = "",
    median: float = 1.25,
) -> RunRecord:
    """A run that uses every kind of row: modified/added operators, verdicts, candidates, a transcript."""
    base = MeasurementRecord(
        side="base",
        status="ok",
        median_ms=1.0,
        mean_ms=1.01,
        std_ms=0.02,
        ci95_low_ms=0.99,
        ci95_high_ms=1.02,
        samples=len(TRICKY),
        calls_per_sample=10,
        stopped_by="rse",
        raw_ms=TRICKY,
        sm_clock_mhz=[1980, None],
    )
    head = MeasurementRecord(side="head", status="ok", median_ms=median, samples=2, raw_ms=[median, median])
    eager = MeasurementRecord(
        side="eager",
        status="crashed",
        reason="CUDA error: illegal memory access",
        fingerprint=FingerprintRecord(gpu="NVIDIA A100", extra={"mig": "1g.10gb"}),
    )
    candidate = CandidateRecord(
        source="import torch\n\ndef gelu(x):\n    return torch.nn.functional.gelu(x)\n",
        origin="fuse-gelu",
        status="ok",
        reward=3,
        speedup_vs_eager=1.5,
        speedup_vs_compile=1.1,
        precision_note="uses TF32 matmul",
        measurement=MeasurementRecord(side="candidate", status="ok", median_ms=0.8, raw_ms=[0.8, 0.81]),
    )
    turns = [
        TurnRecord(0, "system", "You optimize kernels."),
        TurnRecord(
            1,
            "assistant",
            "Trying fusion.",
            tool_name="evaluate",
            tool_args={"source": "...", "seeds": [1, 2]},
            tool_result={"status": "ok", "speedup": 1.5},
            tokens_in=900,
            tokens_out=120,
            cost_usd=0.0031,
            elapsed_s=4.5,
            candidate=0,
        ),
    ]
    gelu = OperatorRecord(
        name="ops/gelu",
        path="ops/gelu.py",
        spec_hash="h" * 16,
        base_spec_hash="g" * 16,
        change="modified",
        measurements=[base, head, eager],
        candidates=[candidate],
        transcript=turns,
        verdict=VerdictRecord("regression", ratio=1.25, p_value=0.001, threshold=0.05),
    )
    added = OperatorRecord(
        name=f"ops/new{tag}",
        path=f"ops/new{tag}.py",
        spec_hash="n" * 16,
        change="added",
        measurements=[MeasurementRecord(side="head", status="ok", median_ms=2.0, raw_ms=[2.0])],
    )
    return RunRecord(
        repository=repo,
        trigger="pull_request",
        head_sha=sha,
        base_sha="a" * 40,
        pr_number=42,
        runner="gpu-runner-1",
        started_at=started,
        finished_at=started + timedelta(minutes=3),
        fingerprint=H100,
        operators=[gelu, added],
        report={
            "schema_version": 1,
            "summary": "1 regression",
            "operators": [{"p_value": 0.004, "ratio": 1.5}],
        },
    )


def test_round_trip_keeps_every_field_and_sample(url: str) -> None:
    store = History.open(url, auto_upgrade=True)
    record = sample_run()
    run_id = store.record_run(record)
    again = store.get_run(run_id)
    assert again == record
    raw = again.operators[0].measurements[0].raw_ms
    assert [x.hex() for x in raw] == [x.hex() for x in TRICKY]  # bit-exact, -0.0 included
    assert store.count("runs") == 1 and store.count("measurements") == 5 and store.count("agent_turns") == 2
    store.close()


def test_operator_history_is_per_commit_in_time_order(url: str) -> None:
    store = History.open(url, auto_upgrade=True)
    for day, sha in ((2, "c2"), (0, "c0"), (1, "c1")):  # recorded out of order
        store.record_run(sample_run(sha * 20, started=T0 + timedelta(days=day), median=1.0 + day))
    other = sample_run("d" * 40, started=T0 + timedelta(days=3))
    other.fingerprint = FingerprintRecord(gpu="NVIDIA L4")
    store.record_run(other)
    points = store.operator_history("acme/kernels", "ops/gelu", fingerprint_key=H100.key, sides=["head"])
    assert [(p.commit_sha, p.median_ms, p.spec_hash) for p in points] == [
        ("c0" * 20, 1.0, "h" * 16),
        ("c1" * 20, 2.0, "h" * 16),
        ("c2" * 20, 3.0, "h" * 16),
    ]
    both = store.operator_history("acme/kernels", "ops/gelu")
    assert len(both) == 8 and {p.side for p in both} == {"base", "head"}
    assert both[0].commit_sha == "a" * 40 and both[0].spec_hash == "g" * 16  # base side: the base code
    assert store.operator_history("acme/kernels", "ops/missing") == []
    store.close()


def test_failed_run_keeps_partial_results(url: str) -> None:
    store = History.open(url, auto_upgrade=True)
    record = sample_run()
    run_id = store.start_run(record)
    store.add_operator(run_id, record.operators[0])
    store.finish_run(run_id, "failed", "measure: ops/new timed out")
    again = store.get_run(run_id)
    assert (again.status, again.error) == ("failed", "measure: ops/new timed out")
    assert again.finished_at is not None and again.operators == record.operators[:1]
    with pytest.raises(StorageError, match="no run 999"):
        store.get_run(999)
    store.close()


def test_migrations_up_down_and_match_the_models(url: str) -> None:
    def tables() -> set[str]:
        engine = sa.create_engine(url)
        try:
            return set(sa.inspect(engine).get_table_names()) - {"alembic_version"}
        finally:
            engine.dispose()

    assert history.upgrade(url, "0001") == (None, "0001")
    assert "agent_turns" not in tables() and "runs" in tables()
    assert history.upgrade(url) == ("0001", "0004")
    assert "agent_turns" in tables()
    history.downgrade(url, "0001")
    assert "agent_turns" not in tables()
    history.downgrade(url, "base")
    assert tables() == set()
    assert history.upgrade(url) == (None, "0004")
    # The models and the migrations describe the same schema (a model change needs a revision).
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from kernelbot.history.models import Base

    engine = sa.create_engine(url)
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    engine.dispose()


def test_rows_written_at_0001_survive_the_upgrade(url: str) -> None:
    history.upgrade(url, "0001")
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # fresh tables: every id below is 1
        conn.execute(sa.text("INSERT INTO repositories (name) VALUES ('acme/old')"))
        conn.execute(sa.text("INSERT INTO commits (repository_id, sha) VALUES (1, 'abc')"))
        conn.execute(
            sa.text(
                "INSERT INTO operators (repository_id, name, path, spec_hash) VALUES (1, 'ops/old', 'ops/old.py', 's')"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO runs (repository_id, trigger, head_commit_id, runner, status, started_at, "
                "schema_version) VALUES (1, 'schedule', 1, 'r', 'completed', :t, 1)"
            ),
            {"t": T0},
        )
        conn.execute(sa.text("INSERT INTO verdicts (run_id, operator_id, change) VALUES (1, 1, 'cosmetic')"))
        conn.execute(
            sa.text(
                "INSERT INTO candidates (run_id, operator_id, source_sha256, source, origin, status, "
                "reward) VALUES (1, 1, 'x', 'pass', 'rule-a', 'ok', 1)"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO measurements (run_id, operator_id, commit_id, side, status, reason, samples, "
                "calls_per_sample, stopped_by, raw_ms, sm_clock_mhz) "
                "VALUES (1, 1, 1, 'head', 'ok', '', 2, 1, 'budget', '[0.5, 0.25]', '[]')"
            )
        )
    engine.dispose()
    with pytest.raises(StorageError, match="0001"):
        History.open(url)
    assert db_command.upgrade(url) == "history database upgraded from schema revision 0001 to 0004"
    store = History.open(url)
    run = store.get_run(1)
    assert run.repository == "acme/old" and run.head_sha == "abc" and run.started_at == T0
    (op,) = run.operators
    assert op.measurements[0].raw_ms == [0.5, 0.25] and op.candidates[0].precision_note is None
    store.record_run(sample_run())  # and the upgraded schema takes new runs
    assert store.count("runs") == 2
    store.close()


def test_explicit_url_at_older_schema_names_the_fix(url: str) -> None:
    history.upgrade(url, "0001")  # an older kernelbot left it at 0001
    with pytest.raises(StorageError) as err:
        History.open(url)
    message = str(err.value)
    assert "kernelbot db upgrade --db URL" in message and "\n" not in message
    assert "0001" in db_command.current(url)
    parser = argparse.ArgumentParser()
    db_command.register(parser.add_subparsers())
    args = parser.parse_args(["db", "upgrade", "--db", url])
    assert args.run(args) == 0
    assert "0004 (up to date)" in db_command.current(url)
    History.open(url).close()


def test_empty_database_gets_the_current_schema(url: str) -> None:
    assert "none" in db_command.current(url)
    History.open(url).close()
    assert "0004 (up to date)" in db_command.current(url)


def test_newer_schema_than_known_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    history.upgrade(url)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(StorageError, match="newer than this kernelbot"):
        History.open(url, auto_upgrade=True)


def test_default_database_is_embedded_sqlite_that_upgrades_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    path = tmp_path / "data" / "kernelbot" / "history.db"
    history.upgrade(f"sqlite:///{path}", "0001")  # an older kernelbot left it at 0001
    store = History.open()
    assert history.schema_status(None) == ("0004", "0004")
    store.record_run(sample_run())
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    engine.dispose()
    store.close()


def test_unreachable_database_is_one_line_without_password(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    with pytest.raises(StorageError) as err:
        History.open(f"postgresql://kb:s3cret-pw@127.0.0.1:{port}/history")
    message = str(err.value)
    assert "cannot reach history database" in message and "***" in message
    assert "s3cret-pw" not in message and "\n" not in message
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StorageError, match="cannot reach history database"):
        History.open(f"sqlite:///{tmp_path / 'dir.db'}")
    with pytest.raises(StorageError, match="cannot use history database"):
        History.open("nosuchdriver://x/y")


# -- 8 concurrent writers ------------------------------------------------------------------------

WRITERS, RUNS_EACH = 8, 5


def _writer(
    url: str, index: int, barrier: multiprocessing.synchronize.Barrier, results: multiprocessing.Queue
) -> None:
    try:
        store = History.open(url)
        barrier.wait(timeout=60)  # everyone inserts the shared repository/commit/operator rows at once
        ids = [
            store.record_run(sample_run(f"{index:02d}{n:02d}" * 10, tag=str(index))) for n in range(RUNS_EACH)
        ]
        store.close()
        results.put(("ok", index, ids))
    except BaseException as err:  # reported to the parent, which fails the test with it
        results.put(("error", index, f"{type(err).__name__}: {err}"))


def test_eight_concurrent_writers_lose_nothing(url: str) -> None:
    History.open(url, auto_upgrade=True).close()
    # fork: separate processes with their own connections, without paying 8 interpreter start-ups on 2 cores.
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(WRITERS), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, i, barrier, results)) for i in range(WRITERS)]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    errors = [o for o in outcomes if o[0] == "error"]
    assert not errors, errors
    ids = [run_id for o in outcomes for run_id in o[2]]
    runs = WRITERS * RUNS_EACH
    assert len(set(ids)) == runs
    store = History.open(url)
    assert store.count("runs") == runs
    assert store.count("measurements") == runs * 5 and store.count("candidates") == runs
    assert store.count("repositories") == 1
    assert store.count("commits") == runs + 1  # every head, one shared base
    assert (
        store.count("operators") == 2 + WRITERS
    )  # gelu's base and head versions, one new operator per writer
    assert store.count("fingerprints") == 2
    assert store.get_run(ids[-1]).operators[0].measurements[0].raw_ms == TRICKY
    store.close()


def test_a_file_path_is_an_sqlite_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--db /some/file.db` (no URL scheme) means SQLite at that path, relative paths included."""
    from kernelbot import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["db", "upgrade", "--db", "rel.db"]) == 0
    assert cli.main(["db", "upgrade", "--db", str(tmp_path / "abs.db")]) == 0
    for name in ("rel.db", "abs.db"):
        with sa.create_engine(f"sqlite:///{tmp_path / name}").connect() as conn:
            assert "repositories" in sa.inspect(conn).get_table_names()
