"""The privacy budget ledger: every release from a registered data set is composed against its
budget, and a release past the budget is refused before its noise is drawn.

:mod:`engine.ledger.composition` is the arithmetic (costs, budgets, exact composition);
:mod:`engine.ledger.store` the database (SQLAlchemy; SQLite by default, any URL through
``$DPWB_LEDGER_URL``; schema migrations by Alembic, upgraded on open);
:mod:`engine.ledger.charge` turns a release's privacy level and noise into a :class:`Cost`.
Nothing prints: a refusal is a reason (:meth:`Ledger.refusal`, :class:`BudgetExceeded`).
Only this package and the release pipeline (:mod:`engine.workflows.release`) charge it.
"""

from engine.ledger.composition import (
    UNITS,
    Budget,
    BudgetExceeded,
    Cost,
    LedgerError,
    Spent,
    composed,
)
from engine.ledger.store import (
    ANONYMOUS,
    BudgetStatus,
    DatasetEntry,
    Ledger,
    ReleaseEntry,
    Reservation,
    data_dir,
    database_message,
    default_url,
    fingerprint_bytes,
    fingerprint_file,
    sqlite_file,
    sqlite_transactions,
    upgrade_schema,
)

__all__ = ["ANONYMOUS", "UNITS", "Budget", "BudgetExceeded", "BudgetStatus", "Cost",
           "DatasetEntry", "Ledger", "LedgerError", "ReleaseEntry", "Reservation", "Spent",
           "composed", "data_dir", "database_message", "default_url", "fingerprint_bytes",
           "fingerprint_file", "sqlite_file", "sqlite_transactions", "upgrade_schema"]
