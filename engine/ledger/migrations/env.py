"""Alembic environment of the ledger: run on the connection :class:`engine.ledger.Ledger`
passes in ``config.attributes["connection"]`` (inside its open transaction, see
:func:`engine.ledger.store.upgrade_schema`)."""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    render_as_batch=True,
    version_table=context.config.attributes["version_table"],
)
with context.begin_transaction():
    context.run_migrations()
