"""Alembic environment of the explorer's session store: run on the connection
:class:`explorer.server.session_store.SessionStore` passes in ``config.attributes["connection"]``
(inside its open transaction). Its revisions are recorded in a version table of their own, so
the store can share the ledger's database without touching the ledger's schema history."""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    render_as_batch=True,
    version_table=context.config.attributes["version_table"],
)
with context.begin_transaction():
    context.run_migrations()
