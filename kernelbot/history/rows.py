"""Records to rows and back (the ORM models of history/models.py)."""

# NOTE: the only SQL-speaking module (with history_models and storage/). Callers pass and get plain
# dataclasses; nothing here connects or migrates until History.open is called.

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from kernelbot.errors import StorageError
from kernelbot.history import models as db
from kernelbot.history.models import (
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
from kernelbot.history.records import (
    SCHEMA_VERSION,
    CandidateRecord,
    FingerprintRecord,
    MeasurementRecord,
    OperatorRecord,
    RunRecord,
    TurnRecord,
    VerdictRecord,
    fields_of,
)

_FINGERPRINT = ("gpu", "driver", "cuda", "torch", "cupy", "kernelbot")
_VERDICT = ("verdict", "ratio", "p_value", "threshold", "error")
_CANDIDATE = tuple(f for f in CandidateRecord.__dataclass_fields__ if f != "measurement")
_TURN = tuple(f for f in TurnRecord.__dataclass_fields__ if f != "candidate")
_MEASUREMENT = tuple(f for f in MeasurementRecord.__dataclass_fields__ if f != "fingerprint")


def window(column: Any, since: datetime | None, until: datetime | None) -> list[Any]:
    """WHERE clauses for since <= column < until, either end open."""
    return [
        c for c in (column >= since if since else None, column < until if until else None) if c is not None
    ]


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
    values = fields_of(fp, _FINGERPRINT)
    return _id_for(
        session, Fingerprint, ["key"], key=fp.key, payload=asdict(fp), schema_version=SCHEMA_VERSION, **values
    )


def write_run(session: Session, record: RunRecord, status: str, operators: list[OperatorRecord]) -> int:
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
              **fields_of(record, ("trigger", "pr_number", "runner", "started_at", "finished_at", "error", "report")))  # fmt: skip
    session.add(run)
    session.flush()
    write_operators(session, run, operators)
    return run.id


def write_operators(session: Session, run: Run, operators: list[OperatorRecord]) -> None:
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
        session.add(Measurement(**ids, fingerprint_id=fp_id, **fields_of(m, _MEASUREMENT)))

    for op in operators:
        head_id = op_ids[(op.name, op.spec_hash)]
        base_id = op_ids[(op.name, op.base_spec_hash)] if op.base_spec_hash is not None else None
        verdict = fields_of(op.verdict, _VERDICT) if op.verdict else {}
        session.add(
            Verdict(
                run_id=run.id,
                operator_id=head_id,
                base_operator_id=base_id,
                change=op.change,
                facts=op.facts,
                **verdict,
            )
        )
        for m in op.measurements:
            if m.side == "base":
                add_measurement(m, base_id or head_id, run.base_commit_id, None)
            else:
                add_measurement(m, head_id, run.head_commit_id, None)
        candidate_ids: list[int] = []
        for c in op.candidates:
            row = Candidate(
                run_id=run.id, operator_id=head_id, source_sha256=c.source_sha256, **fields_of(c, _CANDIDATE)
            )
            session.add(row)
            session.flush()
            candidate_ids.append(row.id)
            if c.measurement is not None:
                add_measurement(c.measurement, head_id, run.head_commit_id, row.id)
        for t in op.transcript:
            candidate_id = candidate_ids[t.candidate] if t.candidate is not None else None
            ids = {"run_id": run.id, "operator_id": head_id, "candidate_id": candidate_id}
            session.add(AgentTurn(**ids, schema_version=SCHEMA_VERSION, **fields_of(t, _TURN)))
    session.flush()


def read_run(session: Session, run_id: int) -> RunRecord:
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
        return MeasurementRecord(**fields_of(m, _MEASUREMENT), fingerprint=fp)

    by_op: dict[int, OperatorRecord] = {}  # head and base operator ids -> the run's record of that operator
    for v in verdicts:
        op = ops[v.operator_id]
        verdict = VerdictRecord(**fields_of(v, _VERDICT)) if v.verdict is not None else None
        base_hash = ops[v.base_operator_id].spec_hash if v.base_operator_id else None
        record = OperatorRecord(
            op.name, op.path, op.spec_hash, v.change, base_hash, verdict=verdict, facts=v.facts
        )
        by_op[v.operator_id] = by_op[v.base_operator_id or v.operator_id] = record
    by_candidate: dict[int, CandidateRecord] = {}
    position: dict[int, int] = {}
    for c in candidates:
        owner = by_op[c.operator_id].candidates
        position[c.id] = len(owner)
        owner.append(by_candidate.setdefault(c.id, CandidateRecord(**fields_of(c, _CANDIDATE))))
    for m in measurements:
        if m.candidate_id is not None:
            by_candidate[m.candidate_id].measurement = measurement(m)
        else:
            by_op[m.operator_id].measurements.append(measurement(m))
    for t in turns:
        candidate = position[t.candidate_id] if t.candidate_id is not None else None
        by_op[t.operator_id].transcript.append(TurnRecord(**fields_of(t, _TURN), candidate=candidate))
    return RunRecord(
        repository=session.get_one(Repository, run.repository_id).name,
        head_sha=shas.get(run.head_commit_id or -1),
        base_sha=shas.get(run.base_commit_id or -1),
        fingerprint=fps.get(run.fingerprint_id or -1),
        operators=list({id(r): r for r in by_op.values()}.values()),
        **fields_of(
            run, ("trigger", "pr_number", "runner", "status", "started_at", "finished_at", "error", "report")
        ),
    )
