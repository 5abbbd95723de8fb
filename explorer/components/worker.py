"""Run a view-model's long job off the event loop, with progress, cancel and safe updates.

A page view-model (a ``param.Parameterized`` with ``running`` and ``status`` parameters)
mixes in :class:`BackgroundRun`, and defines ``_prepare()`` (reset outputs, create
``self._progress``) and ``_job()`` (the work, which must set ``running=False`` when done).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import panel as pn

from explorer.components.background import change_page


class BackgroundRun:
    """``run()`` in the caller's thread, ``start()`` in a worker, ``cancel()``, ``wait()``."""

    #: Name given to the worker thread (shows in thread dumps).
    thread_name = "explorer-run"

    _progress: Any = None
    _thread: threading.Thread | None = None
    _doc: Any = None

    def _prepare(self) -> None:
        raise NotImplementedError(type(self).__name__ + " must define _prepare")

    def _job(self) -> None:
        raise NotImplementedError(type(self).__name__ + " must define _job")

    def run(self) -> None:
        """Run everything now, in the calling thread (tests and notebooks)."""
        self._prepare()
        self._job()

    def start(self) -> None:
        """Run in a worker thread; updates reach the page on its event loop."""
        if self.running:
            return
        self._doc = pn.state.curdoc
        self._prepare()
        self._thread = threading.Thread(target=self._job, name=self.thread_name, daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Ask the running job to stop at its next progress report."""
        if self._progress is not None:
            self._progress.cancel()
            self.status = "Cancelling..."

    def wait(self, timeout: float | None = None) -> None:
        """Block until a started run has finished (tests)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _dispatch(self, fn: Callable[[], None]) -> None:
        """Apply a view-model change on the document's event loop when served."""
        change_page(self._doc, fn)
