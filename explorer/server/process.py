"""What the served explorer does once per server process, before its first page.

``panel serve explorer/app.py`` runs the app script afresh for every browser session, so
anything in the script runs per page load; :func:`prepare` is the part that must run once:

* the explorer's log lines (:func:`explorer.server.log.configure`);
* :func:`skip_bokeh_checks`: Bokeh's checks of every new document and callback, for
  developers only, are left out unless the operator asks for them;
* :func:`skip_signatures`: Panel's rewriting of every component's signature (for tab
  completion in a notebook) on each page's ``pn.extension`` is left out;
* :func:`explorer.server.model_values.install`: Bokeh serialises a model without making the
  defaults it leaves out, and works out once per model class the facts about its defaults
  that it asked again for every property of every model;
* :func:`freeze_startup_heap`: what is alive after the imports (modules, libraries,
  registries, and the parts libraries load on demand: :func:`load_parts_loaded_on_demand`) is
  exempted from garbage collection, so a collection does not walk it;
* :func:`collect_fully_less_often`: Python's automatic full collections, which walk every
  open and recently closed page, wait until closed pages' garbage is likely (Panel collects
  a few seconds after sessions close);
* the planner worker processes (:class:`explorer.planning.workers.PlannerPool`) start in the
  background, so the first comparison of the first user does not wait 2-3 s for them;
* the plan store's jobs report to the shared store (:func:`share_planning`), so any process
  sees them and may cancel them;
* :func:`expire_sessions`: sessions without a tab are dropped once idle for
  ``EXPLORER_SESSION_IDLE_SECONDS``, whether or not anybody opens a page later; the shared
  store is told which sessions have a tab here and forgets those idle everywhere; once some
  are dropped, :func:`release_memory` hands their memory back to the operating system.

The once-only guard lives here, in an imported module, because the script's own globals are
new in every session (a check on them would redo the work on every page).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import importlib
import logging
import os
import threading
from collections.abc import Mapping

import panel as pn
from bokeh.document import Document
from bokeh.settings import settings

from explorer.planning.store import STORE
from explorer.server import log as serverlog
from explorer.server import model_values
from explorer.server.sessions import REGISTRY, SessionRegistry

LOG = logging.getLogger(__name__)
#: Bokeh's developer checks by the environment variable that turns each on or off (see
#: :func:`skip_bokeh_checks`).
CHECKS = {"BOKEH_VALIDATE_DOC": settings.perform_document_validation,
          "BOKEH_PERFORM_ERROR_DIAGNOSTICS": settings.perform_error_diagnostics}
#: Modules the first page or the first store access imports (see
#: :func:`load_parts_loaded_on_demand`).
LOADED_ON_DEMAND = ("alembic.command", "alembic.config", "alembic.runtime.migration",
                    "mako.template", "colorcet")
#: Collections of the middle generation between two automatic full collections (Python's
#: default is 10; see :func:`collect_fully_less_often`).
FULL_COLLECTION_EVERY = 50
#: Markdown with every construct the pages use (emphasis, code, a table, a fenced block), so
#: that rendering it loads every part of the parser that a page would.
SAMPLE_MARKDOWN = "**a** *b* `c` [d](e)\n\n| f |\n| --- |\n| 1 |\n\n```python\nx = 1\n```\n"
#: Longest pause between two sweeps for idle sessions (seconds).
SWEEP_SECONDS = 60.0


def load_parts_loaded_on_demand() -> None:
    """Load now what the first page would load on demand: Markdown's parser, its plugins and
    the code highlighter (on the first Markdown pane rendered), HoloViews' Bokeh plotting
    options (on Panel's first ``pn.extension``: the option builders and their signatures,
    9,700 objects), the store's migrations and templates, the colour maps. Loaded before
    :func:`freeze_startup_heap`, they are frozen with the rest (about 60,000 objects that
    every full collection walked: a third of its time)."""
    pn.extension()
    pn.pane.Markdown(SAMPLE_MARKDOWN).get_root(Document())
    for name in LOADED_ON_DEMAND:
        importlib.import_module(name)


def skip_bokeh_checks(environment: Mapping[str, str] = os.environ) -> list[str]:
    """Turn off Bokeh's checks of every new document (``BOKEH_VALIDATE_DOC``) and of every
    callback registered (``BOKEH_PERFORM_ERROR_DIAGNOSTICS``), each unless the operator set
    it; returns the variables turned off.

    Both only help a developer: validation logs warnings about a document's models (an empty
    layout, a plot without renderers), the same for every session of a page; the diagnostics
    check each ``on_change`` callback's signature, and Panel registers one per linked property.
    In the serving process they cost about 18 ms and 8-10 ms of each page's 200-250 ms build
    (timed on the trade-off and Compare pages, 88-90 models). The tests build and check the
    pages in process; an operator who wants them sets the variable to ``true``.
    """
    skipped = []
    for name, setting in CHECKS.items():
        if name not in environment:
            setting.set_value(False)
            skipped.append(name)
    return skipped


def skip_signatures() -> None:
    """Turn off Panel's ``apply_signatures``: on every ``pn.extension`` call, Panel rebuilds
    the call signature of each component class for tab completion in notebooks and editors,
    which nobody sees in a served page. The app calls ``pn.extension`` on every page open
    (each page loads its own browser extensions): 2 ms of each page's build, and about 3,000
    signature objects that every full collection walked."""
    pn.config.apply_signatures = False


def collect_fully_less_often(every: int = FULL_COLLECTION_EVERY) -> None:
    """Let Python's automatic full garbage collection wait for ``every`` collections of the
    middle generation (Python's default: 10), the young generations' thresholds unchanged.

    A full collection walks every object that is not frozen, which in a serving process is
    mostly the pages open or closed less than Bokeh's unused-session lifetime ago (15 s by
    default): 150,000-200,000 objects, 0.1-0.3 s of CPU each time on this machine. With the
    default, one ran every 5-10 page opens (each page's models and their Param objects are
    long-lived, so they move into the oldest generation), three or four between two of the
    collections that Panel schedules a few seconds after closed sessions are discarded, and
    those found the garbage of the closed pages already collected (benchmarks/page_cpu.py,
    issue 30 item 3). Closed pages' garbage is still collected: by Panel's collection after
    each discard, by :func:`release_memory` once sessions expire, and by this automatic one
    where neither comes."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, every)


def freeze_startup_heap() -> None:
    """Exempt every object alive now from garbage collection (once per process).

    Panel runs a full ``gc.collect()`` a few seconds after browser sessions close, on the
    event loop; without this, each collection walks every object of every imported library
    (about 260,000) and every page load waiting behind it pays for that walk. Objects created
    later (sessions, plans, pages) are collected as before.
    """
    gc.collect()
    gc.freeze()


def release_memory() -> bool:
    """Collect garbage and return the C heap's free pages to the operating system.

    glibc's allocator keeps the memory of freed objects for reuse (each thread's arena and the
    heap's top): after a hundred sessions closed, the server's resident memory stayed
    100-270 MB above idle (benchmarks/README.md) although nothing held their pages any more.
    ``malloc_trim(0)`` gives the free pages back. Returns False where the C library has no
    ``malloc_trim`` (not glibc): the collection still runs.
    """
    gc.collect()
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        trim = None
    if trim is None:
        return False
    trim(0)
    return True


def start_planners() -> None:
    """Start the planner worker processes on a background thread (no-op when planning runs in
    threads or on a cluster). Their spawn and imports run at the workers' lower priority."""
    if STORE.pool is not None:
        threading.Thread(
            target=STORE.pool.warm, name="explorer-planners-start", daemon=True
        ).start()


def share_planning(registry: SessionRegistry = REGISTRY) -> None:
    """Make the registry's shared store the planning board of this process's plan store, and
    count planning jobs per signed-in user (``EXPLORER_MAX_JOBS``)."""
    STORE.owner_of = registry.owner_of
    if registry.persistence is not None:
        STORE.board = registry.persistence


def expire_sessions(
    registry: SessionRegistry = REGISTRY, stop: threading.Event | None = None
) -> threading.Thread:
    """Sweep ``registry`` for idle sessions on a background thread, every quarter of its idle
    time (between 1 s and :data:`SWEEP_SECONDS`), so their memory is freed even when no page is
    opened; setting ``stop`` ends the sweeping. Returns the (started, daemon) thread."""
    interval = min(SWEEP_SECONDS, max(registry.idle_seconds / 4, 1.0))
    stop = stop or threading.Event()

    def sweep() -> None:
        while not stop.wait(interval):
            try:
                if registry.expire():
                    release_memory()
                registry.keep_alive()
            except Exception:  # a failed sweep must not end the sweeping
                LOG.exception("expiring idle sessions failed")

    thread = threading.Thread(target=sweep, name="explorer-session-expiry", daemon=True)
    thread.start()
    return thread


@functools.cache
def prepare() -> None:
    """Configure the log, skip Bokeh's checks and Panel's signatures, serialise models
    without their defaults (:mod:`explorer.server.model_values`), load what loads on demand,
    freeze the startup heap, collect fully less often, share planning, start the planners and
    the sweep for idle sessions, once per process (later calls return at once)."""
    serverlog.configure()
    skip_bokeh_checks()
    skip_signatures()
    model_values.install()
    load_parts_loaded_on_demand()
    freeze_startup_heap()
    collect_fully_less_often()
    share_planning()
    start_planners()
    expire_sessions()
