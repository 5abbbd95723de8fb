"""Progress bookkeeping and the reporting L-BFGS-B run shared by the HDMM optimisers.

Every optimiser loop (p-Identity restarts, the Gaussian dual, OPT_kron sweeps, OPT_marginals
restarts) reports one step per objective evaluation through a :class:`Reporter`, so that one
:class:`~engine.progress.Progress` sees a single increasing iteration count across nested
operators (OPT_HDMM runs OPT_kron, which runs OPT_0 per attribute, ...). Cancellation is the
:class:`~engine.errors.Cancelled` raised by ``Progress.report``; it unwinds through scipy's
optimisers untouched, so no partial strategy escapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.optimize as so

from engine.progress import Progress


class Reporter:
    """Counts objective evaluations and forwards ``(iteration, loss, stage)`` to a Progress.

    Args:
        progress: where to report (None: count only).
        stage: label of the current stage, shown as the progress message.
    """

    def __init__(self, progress: Progress | None = None, stage: str = "",
                 _count: list[int] | None = None) -> None:
        self.progress = progress
        self.stage = stage
        # one mutable counter shared by every staged view of the same run
        self._count = _count if _count is not None else [0]

    @property
    def iteration(self) -> int:
        """Objective evaluations so far (over every stage)."""
        return self._count[0]

    def step(self, loss: float) -> None:
        """Record one evaluation of an objective with value ``loss`` (inf when infeasible)."""
        if self.progress is not None:
            # continue from the Progress's own count: every reporter on it stays in step
            self._count[0] = max(self._count[0], self.progress.iterations)
        self._count[0] += 1
        if self.progress is not None:
            value = float(loss) if math.isfinite(loss) else math.inf
            self.progress.report(self._count[0], value, self.stage)

    def staged(self, stage: str) -> Reporter:
        """The same counter under another stage label."""
        return Reporter(self.progress, stage, self._count)


def reporter(progress: Progress | Reporter | None, stage: str) -> Reporter:
    """A Reporter for ``stage``: a staged view of an existing one, or a new one."""
    if isinstance(progress, Reporter):
        return progress.staged(stage)
    return Reporter(progress, stage)


def minimize_reported(fun: Callable[[np.ndarray], tuple[float, np.ndarray]], x0: np.ndarray,
                      rep: Reporter, *, ftol: float, maxiter: int, bounded: bool = True
                      ) -> tuple[float, np.ndarray]:
    """L-BFGS-B from x0 reporting every evaluation; the best point evaluated and its value.

    Args:
        fun: ``x -> (f, gradient)``; f may be inf (infeasible: the line search backs off).
        x0: start.
        rep: receives one step per evaluation.
        ftol: L-BFGS-B relative reduction tolerance.
        maxiter: largest number of iterations.
        bounded: constrain ``x >= 0`` (the returned point is clipped at 0).
    """
    best = [math.inf, np.asarray(x0, float)]

    def wrapped(x: np.ndarray) -> tuple[float, np.ndarray]:
        f, g = fun(x)
        rep.step(f)
        if f < best[0]:
            best[0], best[1] = f, x.copy()
        return f, g

    # a Bounds object: scipy converts a list of pairs element by element on every call
    bounds = so.Bounds(np.zeros(x0.size), np.inf) if bounded else None
    so.minimize(wrapped, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                options={"ftol": ftol, "gtol": 1e-12, "maxiter": maxiter,
                         "maxfun": 2 * maxiter + 20})
    return best[0], np.maximum(best[1], 0.0) if bounded else best[1]
