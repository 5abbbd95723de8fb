"""Progress reporting and cancellation for long computations (optimisers, adaptive runs)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from engine.errors import Cancelled

#: ``callback(iteration, loss, message)``; the return value is ignored.
ProgressCallback = Callable[[int, float, str], None]


class Progress:
    """Passed into long computations; they call :meth:`report` every iteration.

    Another thread (e.g. a dashboard's cancel button) calls :meth:`cancel`; the next
    :meth:`report` then raises :class:`~engine.errors.Cancelled`, which unwinds the
    computation cleanly.
    """

    def __init__(self, callback: ProgressCallback | None = None) -> None:
        self.callback = callback
        self._cancel = threading.Event()
        self.iterations = 0
        self.last_loss = float("nan")

    def report(self, iteration: int, loss: float, message: str = "") -> None:
        """Record one step; raise Cancelled if cancellation was requested."""
        self.iterations, self.last_loss = iteration, float(loss)
        if self.callback is not None:
            self.callback(iteration, float(loss), message)
        if self._cancel.is_set():
            raise Cancelled(f"cancelled at iteration {iteration}")

    def cancel(self) -> None:
        """Ask the computation to stop at its next report."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._cancel.is_set()


def report(progress: Progress | None, iteration: int, loss: float, message: str = "") -> None:
    """Call ``progress.report`` when a Progress was given."""
    if progress is not None:
        progress.report(iteration, loss, message)
