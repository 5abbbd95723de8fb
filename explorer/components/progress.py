"""Planning progress: a bar, a line of text, skip and cancel buttons, fed by the session's job.

Planning runs on a planner thread (see :class:`explorer.planning.jobs.PlanningJob`); this view
polls it from the page's own event loop with a periodic callback, so the page stays responsive and
finished mechanisms appear while the rest are still being planned.

When the session's job runs in another serving process (the page was reloaded in a process that
does not run it), the view follows the job's row on the shared board instead, once every
:data:`BOARD_POLL_S`: its progress, finished rows (from the shared plan cache) as they arrive,
and a Cancel that reaches the other process (see :mod:`explorer.planning.board`).
"""

from __future__ import annotations

import time
from typing import Any

import panel as pn
import param
from panel.io.callbacks import PeriodicCallback

from explorer.planning.jobs import JobStatus
from explorer.session import Session

#: How often a served page looks at the running job (milliseconds).
POLL_MS = 250
#: Seconds between two reads of the shared board for a job of another process.
BOARD_POLL_S = 2.0


def served() -> bool:
    """True inside a served Bokeh session (False in notebooks and unit tests)."""
    doc = pn.state.curdoc
    return doc is not None and doc.session_context is not None


def browser_connections(doc: Any) -> int | None:
    """How many browsers are connected to ``doc``'s server session now (None: not served).

    Bokeh keeps a closed tab's session for a while (15 s by default, checked every 17 s), so a
    page nobody sees is one with no connection left."""
    context = getattr(doc, "session_context", None) if doc is not None else None
    server_session = getattr(context, "session", None)
    return None if server_session is None else server_session.connection_count


class PlanningProgress(pn.viewable.Viewer):
    """Shows the session's planning job while it runs, here or in another process; its
    button cancels it."""

    session = param.ClassSelector(class_=Session, doc="The session whose job is shown.")
    status = param.String(default="", doc="The last status line shown.")

    def __init__(self, **params) -> None:
        super().__init__(**params)
        # The row's parts are made the first time a job is shown: most page opens have no job
        # running, and an empty hidden row is one Bokeh model instead of five.
        self._bar: pn.indicators.Progress | None = None
        self._text: pn.pane.Markdown | None = None
        self._cancel: pn.widgets.Button | None = None
        self._skip: pn.widgets.Button | None = None
        self._layout = pn.Row(visible=False, css_classes=["planning-progress"],
                              sizing_mode="stretch_width", align="center")
        self._callback = None
        self._doc = None  # the served document whose session polls (set when polling starts)
        self._board_read = -BOARD_POLL_S  # when the board was last read (monotonic seconds)
        self._elsewhere: JobStatus | None = None  # the other process's job being followed
        if self.session.job is not None:
            self.show(self.session.job.status())
        else:
            self.follow_elsewhere()

    def __panel__(self) -> pn.viewable.Viewable:
        if served():
            pn.state.onload(self._start_polling)
        return self._layout

    def _start_polling(self) -> None:
        # Registered once the page is loaded, so the callback belongs to this page's session.
        # In the background: a poll does not toggle the page's busy indicator (two messages
        # to the browser four times a second per open page) and is not logged.
        if self._callback is None:
            self._doc = pn.state.curdoc
            self._callback = PeriodicCallback(callback=self.tick, period=POLL_MS,
                                              background=True, log=False)
            self._callback.start()

    def tick(self) -> None:
        """Look at the job once: pick up finished rows and update the indicator. Once no
        browser is connected to the page any more (its tab closed), the polling stops: Bokeh
        keeps a closed tab's session for 15 s, and a dozen closed pages polling four times a
        second cost the open page's build a few milliseconds of CPU each second."""
        if not self.connected():
            if self._callback is not None:
                self._callback.stop()
                self._callback = None
            return
        if self.session.job is None:
            self.follow_elsewhere()
            return
        self.show(self.session.poll())

    def connected(self) -> bool:
        """False while no browser is connected to this page: a closed tab's polls would read
        the plan store four times a second for a page nobody sees, on the CPU the open pages
        need. A page that is not served counts as connected."""
        connections = browser_connections(self._doc)
        return connections is None or connections > 0

    def follow_elsewhere(self) -> None:
        """Show the session's job that runs in another process (read from the board at most
        every :data:`BOARD_POLL_S`, and only while the session lacks rows); pick up its
        finished rows; hide once it is over."""
        now = time.monotonic()
        if now - self._board_read < BOARD_POLL_S or (self._elsewhere is None
                                                     and self.session.complete):
            return  # a session with every row has no job to follow: no read of the store
        self._board_read = now
        status = self.session.job_elsewhere()
        followed, self._elsewhere = self._elsewhere, status
        if followed is not None and (status is None or status.done != followed.done):
            self.session.refresh()  # rows it finished are in the shared plan cache
        if status is None:
            if self._layout.visible:
                self.show(None)
            return
        self.show(status)
        self._skip.disabled = True  # a skip is the waiting session's own, in that process

    def show(self, status: JobStatus | None) -> None:
        """Display a job status (None hides the indicator)."""
        if status is None or status.finished:
            self._layout.visible = False
            self.status = status.describe() if status is not None else ""
            return
        self.status = status.describe()
        self._make_parts()
        self._bar.value = int(round(100 * status.fraction))
        self._text.object = self.status
        self._cancel.disabled = status.state == "cancelling"
        self._skip.disabled = status.state != "running" or status.current is None
        self._layout.visible = True

    def _make_parts(self) -> None:
        """The bar, the status line and the two buttons, into the row (once)."""
        if self._bar is not None:
            return
        self._bar = pn.indicators.Progress(value=0, max=100, width=260, bar_color="primary",
                                           css_classes=["planning-bar"])
        self._text = pn.pane.Markdown("", css_classes=["planning-status"],
                                      sizing_mode="stretch_width", margin=(0, 10))
        self._cancel = pn.widgets.Button(label="Cancel planning", color="warning",
                                         css_classes=["cancel-planning"], width=150)
        self._cancel.on_click(lambda event: self.cancel())
        self._skip = pn.widgets.Button(label="Skip this mechanism", color="light",
                                       css_classes=["skip-mechanism"], width=170)
        self._skip.on_click(lambda event: self.skip())
        self._layout.objects = [self._bar, self._text, self._skip, self._cancel]

    def skip(self) -> None:
        """Give up on the mechanism being planned; the others are still planned."""
        name = self.session.skip()
        if name and pn.state.notifications is not None:
            pn.state.notifications.info(f"Skipping {name} (it stops at its next checkpoint).",
                                        duration=4000)

    def cancel(self) -> None:
        """Stop waiting for the running job (what has finished is kept): the indicator hides
        at once, not at the next poll. A job of another process is asked to stop (it is the
        session's own): the indicator shows it until it has."""
        if self.session.job is None and self._elsewhere is not None:
            self.session.cancel_elsewhere()  # the other process stops at its next checkpoint
            self._cancel.disabled = True
            return
        self.session.cancel()
        self.show(None)
