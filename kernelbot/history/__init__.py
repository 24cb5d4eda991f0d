"""The history database: typed records, the SQLAlchemy models, queries; the only package that speaks SQL.

Callers pass and get plain dataclasses (records.py); nothing connects or migrates until History.open.
"""

from kernelbot.history.database import History, downgrade, schema_status, upgrade
from kernelbot.history.records import (
    SCHEMA_VERSION,
    CandidateRecord,
    CandidateSummary,
    Change,
    FingerprintRecord,
    HistoryPoint,
    MeasurementRecord,
    OperatorRecord,
    RunRecord,
    RunStatus,
    RunSummary,
    Side,
    TrendPoint,
    Trigger,
    TurnRecord,
    VerdictKind,
    VerdictRecord,
    VerdictSummary,
)

__all__ = [
    "SCHEMA_VERSION",
    "CandidateRecord",
    "CandidateSummary",
    "Change",
    "FingerprintRecord",
    "History",
    "HistoryPoint",
    "MeasurementRecord",
    "OperatorRecord",
    "RunRecord",
    "RunStatus",
    "RunSummary",
    "Side",
    "TrendPoint",
    "Trigger",
    "TurnRecord",
    "VerdictKind",
    "VerdictRecord",
    "VerdictSummary",
    "downgrade",
    "schema_status",
    "upgrade",
]
