"""What the served explorer does once per server process, before its first page.

``panel serve explorer/app.py`` runs the app script afresh for every browser session, so
anything in the script runs per page load; :func:`prepare` is the part that must run once:

* the explorer's log lines (:func:`explorer.serverlog.configure`);
* :func:`freeze_startup_heap`: what is alive after the imports (modules, libraries,
  registries) is exempted from garbage collection, so a collection does not walk it;
* the planner worker processes (:class:`explorer.plan_workers.PlannerPool`) start in the
  background, so the first comparison of the first user does not wait 2-3 s for them.

The once-only guard lives here, in an imported module, because the script's own globals are
new in every session (a check on them would redo the work on every page).
"""

from __future__ import annotations

import functools
import gc
import threading

from explorer import serverlog
from explorer.planning import STORE


def freeze_startup_heap() -> None:
    """Exempt every object alive now from garbage collection (once per process).

    Panel runs a full ``gc.collect()`` a few seconds after browser sessions close, on the
    event loop; without this, each collection walks every object of every imported library
    (about 260,000) and every page load waiting behind it pays for that walk. Objects created
    later (sessions, plans, pages) are collected as before.
    """
    gc.collect()
    gc.freeze()


def start_planners() -> None:
    """Start the planner worker processes on a background thread (no-op when planning runs in
    threads or on a cluster). Their spawn and imports run at the workers' lower priority."""
    if STORE.pool is not None:
        threading.Thread(
            target=STORE.pool.warm, name="explorer-planners-start", daemon=True
        ).start()


@functools.cache
def prepare() -> None:
    """Configure the log, freeze the startup heap and start the planners, once per process
    (later calls return at once)."""
    serverlog.configure()
    freeze_startup_heap()
    start_planners()
