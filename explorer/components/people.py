"""Errors in people at 95 %: the unit an analyst reads first, with RMSE beside it.

A plan's *typical* error in people is the half-width at 95 % of a query whose error has the
plan's RMSE as its standard deviation (:func:`engine.analysis.per_query_error.
typical_half_width`: 1.96 x RMSE for Gaussian noise, the exact quantile of the nearest
query's mix of Laplace terms for Laplace noise). Its *worst* error in people is the 95 %
half-width of the query with the largest error. Both are proportional to the noise scale, so
their ratio to the RMSE is the same at every privacy level: it is computed once per plan and
multiplied by the live RMSE (a slider release costs a multiplication).
"""

from __future__ import annotations

import threading
import weakref

from engine import (
    METHODS,
    QUERY_LIMIT,
    Comparison,
    ComparisonRow,
    PerQueryErrors,
    Plan,
    Privacy,
)
from explorer.planning.people_ready import GAUSSIAN_FACTOR, PEOPLE_LEVEL, people_factor
from explorer.session import Session

#: The one limit on per-query errors the pages state: the engine's (worst queries, a query in
#: words, "every count within +/- N").
PER_QUERY_LIMIT = QUERY_LIMIT
#: What "a typical count" means, for captions and exports.
TYPICAL_MEANING = ("a count whose error has the mechanism's RMSE as its standard deviation is "
                   "within +/- this many people of the truth, 95 % of the time")


def people(value: float | None) -> str:
    """``+/- 14 people`` (one decimal under 10; "n/a" for None)."""
    if value is None:
        return "n/a"
    return f"+/- {value:,.1f} people" if value < 10 else f"+/- {value:,.0f} people"


def row_factor(row: ComparisonRow) -> float:
    """A typical count's 95 % half-width over the RMSE for a comparison row's plan (as in the
    Compare table; 1.959964, the Gaussian one, for a row without a plan)."""
    return people_factor(row.plan)[0] if row.plan is not None else GAUSSIAN_FACTOR


def typical_people(plan: Plan, privacy: Privacy | None = None) -> float:
    """A typical count's error in people at 95 % under ``plan`` at ``privacy`` (default:
    the plan's level)."""
    factor, _ = people_factor(plan)
    return factor * plan.rmse(privacy)


def bound_people(comparison: Comparison | None, privacy: Privacy | None = None
                 ) -> float | None:
    """The SVD bound as a typical error in people at 95 % (1.96 x the bound's RMSE; None
    where there is no bound)."""
    if comparison is None:
        return None
    if privacy is None:
        return comparison.bound_error(PEOPLE_LEVEL)
    rmse = comparison.bound.rmse(comparison.workload, privacy)
    return None if rmse is None else GAUSSIAN_FACTOR * rmse


def plan_errors(session: Session, name: str | None = None) -> PerQueryErrors:
    """The per-query errors of ``name``'s stored plan (default: the selected mechanism),
    shared by every page and session showing that plan: computed once, re-scaled per level.

    Raises:
        ValueError: when the mechanism has no plan.
    """
    name = name or session.selected
    rows = {} if session.plans is None else {r.mechanism: r for r in session.plans.rows}
    row = rows.get(name)
    if row is None or row.plan is None:
        raise ValueError(f"{name or 'no mechanism'} has no plan (not applicable or not "
                         "planned yet)")
    with _ERRORS_LOCK:
        errors = _ERRORS.get(row.plan)
        if errors is None:
            # the session's workload: equal to the plan's, and its labels are already built
            errors = _ERRORS[row.plan] = PerQueryErrors(row.plan, session.workload)
    return errors


#: Per-query errors of each stored plan (dropped with the plan).
_ERRORS: weakref.WeakKeyDictionary[Plan, PerQueryErrors] = weakref.WeakKeyDictionary()
_ERRORS_LOCK = threading.Lock()


def worst_people(session: Session, name: str, privacy: Privacy) -> tuple[float, str]:
    """The worst query's error in people at 95 % under ``name``'s plan at ``privacy``, and
    how it was obtained (a sentence of :data:`METHODS`).

    Raises:
        ValueError: when the mechanism has no plan.
    """
    errors = plan_errors(session, name)
    error = errors.query(errors.worst(), privacy)
    return error.half_width, METHODS[error.method]
