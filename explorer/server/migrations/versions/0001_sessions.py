"""The explorer's sessions (state by server-issued id, with the signed-in owner), read-only
links, and the status rows of planning jobs.

Revision ID: s0001
Revises:
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "s0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "explorer_sessions",
        sa.Column("sid", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=True, index=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("state", sa.JSON, nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), nullable=False, index=True),
    )
    op.create_table(
        "explorer_shared",
        sa.Column("token", sa.String(64), primary_key=True),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False, index=True),
    )
    op.create_table(
        "explorer_jobs",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("noise", sa.String(20), primary_key=True),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("total", sa.Integer, nullable=False),
        sa.Column("done", sa.Integer, nullable=False),
        sa.Column("current", sa.String(100), nullable=True),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("cancel", sa.Boolean, nullable=False),
        sa.Column("process", sa.String(100), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("explorer_jobs")
    op.drop_table("explorer_shared")
    op.drop_table("explorer_sessions")
