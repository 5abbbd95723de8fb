"""Data sets get an owner and can be archived.

``owner``: who registered the data set (the signed-in user; "anonymous" without sign-in);
existing rows take their ``created_by`` or "anonymous". ``archived``: when the data set was
archived (NULL: open for releases); an archived data set keeps its history as evidence and
takes no new release.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(sa.Column("owner", sa.String(200), nullable=False,
                                   server_default="anonymous"))
        batch.add_column(sa.Column("archived", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE datasets SET owner = created_by WHERE created_by IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("archived")
        batch.drop_column("owner")
