"""Base schema: repositories, commits, fingerprints, operators, runs, verdicts, candidates, measurements.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def _id() -> sa.Column:
    return sa.Column("id", sa.Integer(), primary_key=True)


def _fk(name: str, target: str, *, nullable: bool = False, cascade: bool = False) -> sa.Column:
    return sa.Column(
        name, sa.Integer(), sa.ForeignKey(target, ondelete="CASCADE" if cascade else None), nullable=nullable
    )


def upgrade() -> None:
    op.create_table(
        "repositories",
        _id(),
        sa.Column("name", sa.String(200), nullable=False),
        sa.UniqueConstraint("name", name="uq_repositories_name"),
    )
    op.create_table(
        "commits",
        _id(),
        _fk("repository_id", "repositories.id"),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.UniqueConstraint("repository_id", "sha", name="uq_commits_repository_id_sha"),
    )
    op.create_table(
        "fingerprints",
        _id(),
        sa.Column("key", sa.String(64), nullable=False),
        *(
            sa.Column(c, sa.String(200 if c == "gpu" else 64), nullable=False)
            for c in ("gpu", "driver", "cuda", "torch", "cupy", "kernelbot")
        ),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.UniqueConstraint("key", name="uq_fingerprints_key"),
    )
    op.create_table(
        "operators",
        _id(),
        _fk("repository_id", "repositories.id"),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("path", sa.String(500), nullable=False),
        sa.Column("spec_hash", sa.String(64), nullable=False),
        sa.UniqueConstraint(
            "repository_id", "name", "spec_hash", name="uq_operators_repository_id_name_spec_hash"
        ),
    )
    op.create_table(
        "runs",
        _id(),
        _fk("repository_id", "repositories.id"),
        sa.Column("trigger", sa.String(32), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=True),
        _fk("base_commit_id", "commits.id", nullable=True),
        _fk("head_commit_id", "commits.id", nullable=True),
        sa.Column("runner", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", TZ, nullable=False),
        sa.Column("finished_at", TZ, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        _fk("fingerprint_id", "fingerprints.id", nullable=True),
        sa.Column("schema_version", sa.Integer(), nullable=False),
    )
    op.create_index("ix_runs_repository_started", "runs", ["repository_id", "started_at"])
    op.create_table(
        "verdicts",
        _id(),
        _fk("run_id", "runs.id", cascade=True),
        _fk("operator_id", "operators.id"),
        _fk("base_operator_id", "operators.id", nullable=True),
        sa.Column("change", sa.String(16), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=True),
        *(sa.Column(c, sa.Float(), nullable=True) for c in ("ratio", "p_value", "threshold")),
        sa.Column("error", sa.Text(), nullable=True),
        sa.UniqueConstraint("run_id", "operator_id", name="uq_verdicts_run_id_operator_id"),
    )
    op.create_table(
        "candidates",
        _id(),
        _fk("run_id", "runs.id", cascade=True),
        _fk("operator_id", "operators.id"),
        sa.Column("source_sha256", sa.String(64), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("origin", sa.String(200), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("reward", sa.Integer(), nullable=False),
        sa.Column("speedup_vs_eager", sa.Float(), nullable=True),
        sa.Column("speedup_vs_compile", sa.Float(), nullable=True),
    )
    op.create_index("ix_candidates_operator_reward", "candidates", ["operator_id", "reward"])
    op.create_index("ix_candidates_run_id", "candidates", ["run_id"])
    op.create_table(
        "measurements",
        _id(),
        _fk("run_id", "runs.id", cascade=True),
        _fk("operator_id", "operators.id"),
        _fk("commit_id", "commits.id", nullable=True),
        _fk("candidate_id", "candidates.id", nullable=True, cascade=True),
        _fk("fingerprint_id", "fingerprints.id", nullable=True),
        sa.Column("side", sa.String(16), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        *(
            sa.Column(c, sa.Float(), nullable=True)
            for c in (
                "max_abs_err",
                "max_rel_err",
                "median_ms",
                "mean_ms",
                "std_ms",
                "ci95_low_ms",
                "ci95_high_ms",
            )
        ),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("calls_per_sample", sa.Integer(), nullable=False),
        sa.Column("stopped_by", sa.String(32), nullable=False),
        sa.Column("raw_ms", sa.JSON(), nullable=False),
        sa.Column("sm_clock_mhz", sa.JSON(), nullable=False),
    )
    op.create_index("ix_measurements_operator_fingerprint", "measurements", ["operator_id", "fingerprint_id"])
    op.create_index("ix_measurements_run_id", "measurements", ["run_id"])


def downgrade() -> None:
    for table in (
        "measurements",
        "candidates",
        "verdicts",
        "runs",
        "operators",
        "fingerprints",
        "commits",
        "repositories",
    ):
        op.drop_table(table)
