"""What the learned search policy trains on: each candidate's evaluation time and each operator's analysis facts.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("candidates", sa.Column("wall_s", sa.Float(), nullable=True))
    op.add_column("verdicts", sa.Column("facts", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("verdicts") as batch:  # SQLite drops columns by rebuilding the table
        batch.drop_column("facts")
    with op.batch_alter_table("candidates") as batch:
        batch.drop_column("wall_s")
