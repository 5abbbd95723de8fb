"""The first schema: data sets with a budget, and their releases.

Revision ID: 0001
Revises:
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("fingerprint", sa.String(64), nullable=False, unique=True),
        sa.Column("domain", sa.JSON, nullable=True),
        sa.Column("budget_unit", sa.String(20), nullable=False),
        sa.Column("budget_total", sa.Float, nullable=False),
        sa.Column("budget_delta", sa.Float, nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(200), nullable=True),
    )
    op.create_table(
        "releases",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("dataset_id", sa.Integer, sa.ForeignKey("datasets.id"), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("mechanism", sa.String(100), nullable=False),
        sa.Column("knobs", sa.JSON, nullable=True),
        sa.Column("workload_sha256", sa.String(64), nullable=True),
        sa.Column("privacy", sa.JSON, nullable=True),
        sa.Column("cost_kind", sa.String(10), nullable=False),
        sa.Column("rho", sa.Float, nullable=True),
        sa.Column("epsilon", sa.Float, nullable=True),
        sa.Column("delta", sa.Float, nullable=False),
        sa.Column("rounds", sa.JSON, nullable=True),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("user", sa.String(200), nullable=True),
        sa.Column("record_path", sa.String(1000), nullable=True),
    )
    op.create_index("ix_releases_dataset_id", "releases", ["dataset_id"])


def downgrade() -> None:
    op.drop_index("ix_releases_dataset_id", "releases")
    op.drop_table("releases")
    op.drop_table("datasets")
