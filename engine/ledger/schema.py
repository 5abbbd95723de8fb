"""The ledger's tables (SQLAlchemy Core): data sets and their releases.

The migration scripts in ``engine/ledger/migrations/versions/`` create and change these tables;
this module is the code's view of the head revision (queries are built from it). Keep the two in
step: a column added here needs a new revision there.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

datasets = sa.Table(
    "datasets", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("fingerprint", sa.String(64), nullable=False, unique=True),
    sa.Column("domain", sa.JSON, nullable=True),
    sa.Column("budget_unit", sa.String(20), nullable=False),
    sa.Column("budget_total", sa.Float, nullable=False),
    sa.Column("budget_delta", sa.Float, nullable=True),
    sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    sa.Column("created_by", sa.String(200), nullable=True),
    sa.Column("owner", sa.String(200), nullable=False, server_default="anonymous"),
    sa.Column("archived", sa.DateTime(timezone=True), nullable=True),
)

releases = sa.Table(
    "releases", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("dataset_id", sa.Integer, sa.ForeignKey("datasets.id"), nullable=False,
              index=True),
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
