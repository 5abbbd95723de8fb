"""The session's planning: the third layer of a :class:`~explorer.session.Session`.

:class:`PlanningQueue` asks the plan store to plan the chosen mechanisms that have no plan yet,
cheapest first (:func:`explorer.planning.schedule.schedule`), follows the job that plans them
(:class:`~explorer.planning.jobs.PlanningJob`, shared with every session that waits for the
same workload and noise), and lists where each missing mechanism stands (``queue``). Its poll
picks up finished rows, but not while a page of the session loads in a browser. Cancel and skip
are this session's own: the job goes on for the other sessions that wait for it.

Nothing here imports Panel.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import Any

import param

from engine import Scenario
from explorer.planning.jobs import JobStatus, PlanningJob, queue_rows
from explorer.planning.schedule import Estimate, schedule
from explorer.planning.store import PlanningRefused
from explorer.session.plans import PlansView

#: Seconds a page counts as loading at most (a browser that never reports it loaded must not
#: hold back its session's other pages for longer).
LOAD_PATIENCE = 30.0


class PlanningQueue(PlansView):
    """Planning the missing mechanisms for this session, and following the job that does.

    Args:
        scenario, store: as for :class:`~explorer.session.plans.PlansView`.
    """

    job = param.ClassSelector(
        class_=PlanningJob,
        allow_None=True,
        default=None,
        doc="The planning job the session waits for, if any.",
    )
    queue = param.List(
        default=[],
        doc=(
            "``(mechanism, state, estimate)`` of every chosen mechanism without a row yet, in "
            "plan order: running, queued, or held back until the user asks (see "
            "``explorer.planning.jobs.queue_rows``)."
        ),
    )
    held = param.List(
        default=[],
        item_type=Estimate,
        doc="Mechanisms estimated to plan over a minute, not started until the user asks.",
    )

    def __init__(self, scenario: Scenario, **params: Any) -> None:
        self._allowed: dict[tuple[str, str], set[str]] = {}  # slow ones the user asked for
        self._estimates: dict[str, Estimate] = {}  # of the mechanisms last scheduled
        self._seen_done = -1
        self._loading: dict[Hashable, float] = {}  # pages loading in a browser -> since when
        super().__init__(scenario, **params)

    @property
    def complete(self) -> bool:
        """True when the comparison on show has every chosen mechanism's row (but those held
        back) and the bound.

        It reads what the session shows, not the plan store: a row finished in the store
        reaches the pages at the next poll, and until then the headline must not say that
        planning is over while the table still lacks that row.
        """
        shown = self.plans
        if shown is None or shown.bound.method == "pending":
            return False
        held = {e.mechanism for e in self.held}
        have = {r.mechanism for r in shown.rows}
        return all(n in have or n in held for n in self.mechanisms)

    def request_comparison(
        self, background: bool = True, include_skipped: bool = False, include_slow: bool = False
    ) -> PlanningJob | None:
        """Start planning what is missing, cheapest first (None when nothing is to plan).

        The bound starts at once on its own (see ``PlanStore.ensure_bound``). Mechanisms this
        session skipped are planned again only with ``include_skipped``; those estimated to
        take over a minute (``explorer.planning.schedule.AUTO_START_SECONDS``) only with
        ``include_slow`` (the page's "Plan anyway"), or once asked for on this workload.
        A user with too many unfinished jobs is refused: the queue rows say why (None).
        """
        where = (self._key, self.privacy.noise)
        if include_skipped:
            self._skipped.pop(where, None)
        if include_slow:
            self._allowed.setdefault(where, set()).update(self.missing())
        start, held = self._schedule()
        try:
            job = self._store.start(
                self,
                self.scenario.workload,
                self.privacy,
                [e.mechanism for e in start],
                key=self._key,
                background=background,
            )
        except PlanningRefused as exc:  # too many jobs of this user: say so in the queue
            self.queue = [(e.mechanism, str(exc), e.describe()) for e in start + held]
            return None
        if self.job is not None and self.job is not job:
            self.job.leave(self)
        self.job = job if job is not None and not job.status().finished else None
        self._seen_done = -1
        self.held = held
        self._update_queue(self.job.status() if self.job is not None else None)
        self.refresh()
        return job

    def preview_queue(self) -> None:
        """Show the plan before it starts: the missing mechanisms in the order they will start,
        with the cost model's estimates (a served page shows this while it loads, since
        planning starts once it has). Nothing changes while a job runs."""
        if self.job is not None:
            return
        start, self.held = self._schedule()
        rows = queue_rows(None, [e.mechanism for e in start], self.held, self._estimates)
        if rows != self.queue:
            self.queue = rows

    def _schedule(self) -> tuple[list[Estimate], list[Estimate]]:
        """The missing mechanisms to start now, cheapest first, and those held back (see
        :func:`explorer.planning.schedule.schedule`); remembers their estimates."""
        where = (self._key, self.privacy.noise)
        start, held = schedule(
            self.missing(), self.scenario.workload, self.privacy, self._allowed.get(where, ())
        )
        self._estimates = {e.mechanism: e for e in start + held}
        return start, held

    def _update_queue(self, status: JobStatus | None) -> None:
        pending = self.job.pending() if self.job is not None else ()
        waiting = set(self.missing())
        rows = queue_rows(
            status,
            [n for n in pending if n in waiting],
            [e for e in self.held if e.mechanism in waiting],
            self._estimates,
        )
        if rows != self.queue:
            self.queue = rows

    def compare_now(self) -> None:
        """Plan what is missing on the calling thread (notebooks, tests)."""
        self.request_comparison(background=False)

    def page_loading(self, page: Hashable) -> None:
        """A browser is loading ``page`` (a served document) of this session: until
        :meth:`page_loaded`, polls leave the session as it is (see :meth:`poll`)."""
        self._loading[page] = time.monotonic()

    def page_loaded(self, page: Hashable) -> None:
        """``page`` has loaded in its browser, or closed (a page not loading: nothing)."""
        self._loading.pop(page, None)

    def _a_page_is_loading(self) -> bool:
        since = time.monotonic() - LOAD_PATIENCE
        return any(started > since for started in list(self._loading.values()))

    def poll(self) -> JobStatus | None:
        """Pick up rows (and the bound) finished since the last poll; clear the job once it
        is over.

        Nothing is picked up while a page of this session loads in a browser (for at most
        :data:`LOAD_PATIENCE` seconds): Panel sends a served page's document whole when the
        browser connects and drops changes to it until the browser reports it loaded, so a
        row picked up then (by the poll of the user's other page) never reached the new page:
        the tour's Compare page kept 3 of its 4 rows. The next poll after it loaded does it.
        """
        if self._a_page_is_loading():
            return self.job.status() if self.job is not None else None
        if self._bound_arrived():
            self.refresh()
        job = self.job
        if job is None:
            return None
        status = job.status()
        if job.key != self._key or job.privacy.noise != self.privacy.noise:
            job.leave(self)  # the user moved on to another workload or noise
            self.job = None
        elif status.finished or not job.waits(self):
            self.job = None
        elif status.done == self._seen_done:
            self._update_queue(status)  # a queued job may have started meanwhile
            return status  # no new row: keep the displayed comparison as it is
        self._seen_done = status.done
        self._update_queue(status)
        self.refresh()
        return status

    def cancel(self) -> None:
        """Stop waiting for the planning job (finished rows are kept).

        The job itself stops only when no other session waits for it.
        """
        job, self.job = self.job, None
        if job is not None:
            job.leave(self)
        self._update_queue(None)
        self.refresh()

    def job_elsewhere(self) -> JobStatus | None:
        """The status of the unfinished job that plans this workload and noise in another
        serving process (the session's page was reloaded there; see
        :mod:`explorer.planning.board`), or None."""
        return self._store.job_elsewhere(self._key, self.privacy.noise)

    def cancel_elsewhere(self) -> bool:
        """Ask the job of :meth:`job_elsewhere` to stop (False: there is none any more)."""
        return self._store.cancel_everywhere(self._key, self.privacy.noise)

    def skip(self) -> str | None:
        """Skip the mechanism being planned (for this session); returns its name.

        The job goes on with the others; the mechanism stops only when every session waiting
        for the job has skipped it.
        """
        name = self.job.skip(self) if self.job is not None else None
        if name is not None:
            self._skipped.setdefault((self._key, self.privacy.noise), set()).add(name)
        return name

    def release(self) -> None:
        """Stop waiting for planning (the last browser tab of this session closed)."""
        if self.job is not None:
            self.job.leave(self)
            self.job = None
