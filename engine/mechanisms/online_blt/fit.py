"""Fitting a buffered linear Toeplitz strategy to a horizon of n steps.

The strategy C has ``c_0 = 1`` and ``c_k = sum_j omega_j theta_j**(k-1)`` (k >= 1) for
``buffers`` pairs ``0 < theta_j < 1``, ``omega_j > 0`` (Dvijotham et al. 2024, section 3), so
C and ``C^-1`` both apply as recurrences with ``buffers`` numbers of state. The unit total
squared error

    sensitivity**2 * ||W C^-1||_F**2 = (sum_{k<n} c_k**2) * sum_k (n - k) b_k**2

(``b = cumsum(first column of C^-1)``) is evaluated in closed form in O(buffers^3), whatever
n (:func:`engine.linalg.causal.blt_sensitivity2`,
:func:`engine.linalg.causal.blt_prefix_total_variance`); the worst (last) step's unit error
``sensitivity**2 * sum_{k<n} b_k**2``, Dvijotham et al.'s objective, likewise
(:func:`engine.linalg.causal.blt_last_step_variance`), for ``error="max"``. We start from
the non-negative least squares fit of the square-root factorization's column on log-spread
decay rates, and from the same kind of rates with equal weights, and minimise
the logarithm of the error over ``(log(-log theta), log omega)``: L-BFGS-B with central
differences, then a Nelder-Mead polish (the objective is smooth but badly scaled), from a
few starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize, nnls

from engine.linalg.causal import (
    BufferedToeplitz,
    blt_last_step_variance,
    blt_prefix_total_variance,
    blt_sensitivity2,
    sqrt_coefficients,
)
from engine.progress import Progress, report

#: Value of the objective for parameters whose inverse recurrence diverges.
DIVERGED = 1e3
#: Longest time scale of each least-squares start, as a fraction of the horizon (the
#: objective has local minima; the best of these starts and :func:`spread_start` is kept).
STARTS = (1.0, 0.1)
#: Most Nelder-Mead iterations of the polish after each L-BFGS-B run.
POLISH_ITERATIONS = 600
#: Longest time scale of :func:`spread_start`, as a fraction of the horizon.
SPREAD_LONGEST = 0.1
#: Errors a fit can minimise: "mean" (total squared error over the horizon) or "max" (the
#: worst step's, the last one's; Dvijotham et al.'s objective).
ERRORS = ("mean", "max")


@dataclass(frozen=True)
class BltFit:
    """Optimised BLT parameters for a horizon.

    Attributes:
        omega, theta: weights and decay rates (one per buffer).
        n: the horizon (steps).
        unit_tse: sensitivity**2 * ||W C^-1||_F**2 of the fit (unit noise).
        evaluations: closed-form error evaluations made.
        error: the error minimised, one of :data:`ERRORS`.
    """

    omega: np.ndarray
    theta: np.ndarray
    n: int
    unit_tse: float
    evaluations: int
    error: str = "mean"

    def strategy(self) -> BufferedToeplitz:
        """C, applied as one recurrence per buffer."""
        return BufferedToeplitz(self.omega, self.theta, self.n)


def blt_unit_tse(omega: np.ndarray, theta: np.ndarray, n: int) -> float:
    """Unit total squared error of the BLT strategy on the n-step prefix workload (closed
    form; inf when its inverse diverges)."""
    return blt_sensitivity2(omega, theta, n) * blt_prefix_total_variance(omega, theta, n)


def blt_unit_max(omega: np.ndarray, theta: np.ndarray, n: int) -> float:
    """Unit max (last-step) squared error ``sensitivity**2 * sum_{k<n} b_k**2`` of the BLT
    strategy on the n-step prefix workload (closed form)."""
    return blt_sensitivity2(omega, theta, n) * blt_last_step_variance(omega, theta, n)


def start(buffers: int, n: int, longest: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Decay rates log-spread over time scales from 2 steps to ``longest * n`` steps, and the
    non-negative weights fitting the square-root column on them (relative error, log-spaced
    lags)."""
    scales = np.logspace(0.3, math.log10(max(longest * n, 4)), buffers)
    theta = 1.0 - 1.0 / scales
    lags = np.unique(np.logspace(0, math.log10(max(n - 1, 1)), 200).astype(int))
    c = sqrt_coefficients(int(lags.max()) + 1)[lags]
    design = theta[None, :] ** (lags[:, None] - 1) / c[:, None]
    omega, _ = nnls(design, np.ones(lags.size))
    return np.maximum(omega, 1e-6), theta


def spread_start(buffers: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Decay rates log-spread over time scales from 2 steps to ``SPREAD_LONGEST * n`` steps,
    every weight ``1 / (2 buffers)`` (so ``c_1 = 1/2``, the square root's): no buffer starts
    at zero weight, which the least-squares starts allow and which lets the optimiser settle
    with a buffer switched off or two buffers merged (n = 4,096)."""
    scales = np.logspace(math.log10(2.0), math.log10(max(SPREAD_LONGEST * n, 3.0)), buffers)
    return np.full(buffers, 0.5 / buffers), 1.0 - 1.0 / scales


def fit_blt(n: int, buffers: int = 5, max_iterations: int = 2000,
            progress: Progress | None = None, error: str = "mean") -> BltFit:
    """The BLT parameters minimising the unit total squared error on n steps (``error="mean"``)
    or the unit squared error of the worst step (``error="max"``)."""
    if error not in ERRORS:
        raise ValueError(f"error: one of {', '.join(ERRORS)}, not {error!r}")
    measure = blt_unit_tse if error == "mean" else blt_unit_max
    omega0, theta0 = start(buffers, n)
    if n < 2:
        return BltFit(omega0, theta0, n, 1.0, 0, error)
    evaluations = 0

    def parameters(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(over="ignore"):
            return np.exp(z[buffers:]), np.exp(-np.exp(z[:buffers]))

    def error(z: np.ndarray) -> float:
        nonlocal evaluations
        evaluations += 1
        omega, theta = parameters(z)
        if not (np.all(np.isfinite(omega)) and np.all(np.isfinite(theta))):
            return DIVERGED
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            value = measure(omega, theta, n)
        return math.log(value) if math.isfinite(value) and value > 0 else DIVERGED

    z0 = np.concatenate((np.log(-np.log(theta0)), np.log(omega0)))
    base = error(z0)

    def objective(z: np.ndarray) -> float:
        return error(z) - base  # near 0: L-BFGS-B's relative stopping test stays meaningful

    def step(z: np.ndarray) -> None:
        report(progress, evaluations, math.exp(base + objective(z)), "BLT fit")

    candidates = [z0]
    starts = [start(buffers, n, longest) for longest in STARTS] + [spread_start(buffers, n)]
    for omega, theta in starts:
        z = np.concatenate((np.log(-np.log(theta)), np.log(omega)))
        quasi_newton = minimize(objective, z, method="L-BFGS-B", jac="3-point",
                                callback=step, options={
                                    "maxiter": max_iterations, "ftol": 1e-15, "gtol": 1e-10,
                                    "finite_diff_rel_step": 1e-5})
        polished = minimize(objective, quasi_newton.x, method="Nelder-Mead", callback=step,
                            options={"maxiter": min(max_iterations, POLISH_ITERATIONS),
                                     "xatol": 1e-7,
                                     "fatol": 1e-12})
        candidates += [quasi_newton.x, polished.x]
    omega, theta = parameters(min(candidates, key=objective))
    return BltFit(omega, theta, n, blt_unit_tse(omega, theta, n), evaluations, error)
