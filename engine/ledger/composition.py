"""Exact composition of release costs against a data set's budget.

A release's :class:`Cost` is one of

* ``pure``: eps-DP (Laplace, discrete Laplace); it also is eps**2 / 2 -zCDP;
* ``zcdp``: rho-zCDP (the Gaussian mechanisms: the discrete Gaussian's rho is exact, and an
  (eps, delta) Gaussian release is tracked by the rho its sampler achieves, which the release
  record states); its (eps, delta) is kept for display only;
* ``approx``: (eps, delta)-DP with no zCDP rho (a non-Gaussian mechanism): basic composition.

A :class:`Budget` is a total in one unit:

* ``rho``: spent = sum of rho (pure releases count eps**2 / 2); approx releases cannot join;
* ``epsilon`` (pure): spent = sum of eps; only pure releases can join;
* ``epsilon-delta`` (a total (eps, delta)): pure and approx releases compose by basic
  composition, ``(sum eps_i, sum delta_i)``; zCDP releases add their rho, and that rho is
  converted once, at the delta the budget has left, with the Canonne-Kamath-Steinke bound
  (:func:`engine.privacy.cdp_eps`); spent eps = basic eps + converted eps.

Everything here is arithmetic on floats (sums, and the bisections of ``engine.privacy``); no
database. :func:`composed` is what the ledger calls inside its transaction.

Example:
    >>> b = Budget("rho", 1.0)
    >>> round(composed(b, [Cost.zcdp(0.25), Cost.pure(0.5)]).spent, 12)
    0.375
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from engine.errors import SpecError
from engine.privacy import cdp_eps, cdp_rho

UNITS = ("rho", "epsilon", "epsilon-delta")
#: relative slack when comparing a float sum with the total (sums such as 0.1 + 0.2 > 0.3)
SLACK = 1e-12


class LedgerError(SpecError):
    """A ledger problem for the user: one line (a bad budget, a database that cannot be used)."""


class BudgetExceeded(LedgerError):  # noqa: N818 -- reads as "budget exceeded: why"
    """A release refused because its cost would pass the data set's budget (one line:
    spent / requested / total)."""


@dataclass(frozen=True)
class Cost:
    """The privacy cost of one release.

    Attributes:
        kind: ``pure``, ``zcdp`` or ``approx`` (module docstring).
        rho: zCDP rho (pure: eps**2 / 2; approx: None).
        epsilon: eps of the release's stated guarantee (zcdp: None unless it was stated).
        delta: delta of that guarantee (0 for pure).
    """

    kind: str
    rho: float | None
    epsilon: float | None
    delta: float

    @classmethod
    def pure(cls, epsilon: float) -> Cost:
        """eps-DP (and eps**2/2-zCDP)."""
        _positive("epsilon", epsilon)
        return cls("pure", epsilon**2 / 2.0, float(epsilon), 0.0)

    @classmethod
    def zcdp(cls, rho: float, epsilon: float | None = None, delta: float = 0.0) -> Cost:
        """rho-zCDP; ``epsilon, delta`` the (eps, delta) the user asked for, if any."""
        _positive("rho", rho)
        return cls("zcdp", float(rho), None if epsilon is None else float(epsilon), float(delta))

    @classmethod
    def approx(cls, epsilon: float, delta: float) -> Cost:
        """(eps, delta)-DP without a zCDP rho: basic composition."""
        _positive("epsilon", epsilon)
        if not 0 < delta < 1:
            raise LedgerError(f"delta: must lie strictly between 0 and 1, got {delta!r}")
        return cls("approx", None, float(epsilon), float(delta))

    def describe(self) -> str:
        """``eps=0.5`` / ``rho=0.125`` / ``eps=1 delta=1e-06``."""
        if self.kind == "pure":
            return f"eps={self.epsilon:.6g}"
        if self.kind == "zcdp":
            return f"rho={self.rho:.6g}"
        return f"eps={self.epsilon:.6g} delta={self.delta:.3g}"


@dataclass(frozen=True)
class Budget:
    """A data set's total budget: ``unit`` in :data:`UNITS`, ``total`` (eps or rho) and, for
    ``epsilon-delta``, its ``delta``."""

    unit: str
    total: float
    delta: float | None = None

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise LedgerError(f"unit: unknown {self.unit!r}; allowed: {', '.join(UNITS)}")
        _positive("total", self.total)
        if self.unit == "epsilon-delta":
            if self.delta is None or not 0 < self.delta < 1:
                raise LedgerError(f"delta: an epsilon-delta budget needs a delta in (0, 1), "
                                  f"got {self.delta!r}")
        elif self.delta is not None:
            raise LedgerError(f"delta: a {self.unit} budget has no delta")

    def describe(self, amount: float | None = None) -> str:
        """``rho=1`` / ``eps=2`` / ``eps=2 delta=1e-06`` (``amount`` instead of the total)."""
        value = self.total if amount is None else amount
        if self.unit == "rho":
            return f"rho={value:.6g}"
        if self.unit == "epsilon":
            return f"eps={value:.6g}"
        return f"eps={value:.6g} delta={self.delta:.3g}"


@dataclass(frozen=True)
class Spent:
    """Composition of a list of costs against a budget (all in the budget's unit).

    Attributes:
        spent: the budget used (rho, or eps; inf when an epsilon-delta budget's delta is used
            up by the basic part while zCDP releases remain).
        remaining: ``max(total - spent, 0)``.
        remaining_rho: the largest zCDP rho one more release could spend.
        basic_epsilon, basic_delta, zcdp_rho: the parts (epsilon-delta budgets).
    """

    budget: Budget
    spent: float
    remaining: float
    remaining_rho: float
    basic_epsilon: float
    basic_delta: float
    zcdp_rho: float

    def remaining_epsilon(self, delta: float) -> float:
        """The remaining budget as the eps of an (eps, delta) guarantee at ``delta``.

        ``rho`` budgets convert the remaining rho (CKS); ``epsilon`` budgets are pure (any
        delta); ``epsilon-delta`` budgets answer at their own delta only.
        """
        if self.budget.unit == "rho":
            return cdp_eps(self.remaining_rho, delta) if self.remaining_rho > 0 else 0.0
        return self.remaining


def _positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not (isinstance(value, int | float) and value > 0
                                       and math.isfinite(value)):
        raise LedgerError(f"{name}: must be a positive number, got {value!r}")


def composed(budget: Budget, costs: Iterable[Cost]) -> Spent:
    """Compose ``costs`` in ``budget``'s unit.

    Raises:
        LedgerError: a cost that cannot be charged to this unit (zCDP or (eps, delta) to a pure
            eps budget; (eps, delta) without rho to a rho budget).
    """
    costs = list(costs)
    if budget.unit == "rho":
        for c in costs:
            if c.rho is None:
                raise LedgerError(f"budget: an (eps, delta) release without a zCDP rho "
                                  f"({c.describe()}) cannot be charged to a rho budget")
        spent = math.fsum(c.rho for c in costs)
        remaining = max(budget.total - spent, 0.0)
        return Spent(budget, spent, remaining, remaining, 0.0, 0.0, spent)
    if budget.unit == "epsilon":
        for c in costs:
            if c.kind != "pure":
                raise LedgerError(f"budget: a {c.kind} release ({c.describe()}) cannot be "
                                  f"charged to a pure eps budget (it is not eps-DP)")
        spent = math.fsum(c.epsilon for c in costs)
        remaining = max(budget.total - spent, 0.0)
        return Spent(budget, spent, remaining, remaining**2 / 2.0, spent, 0.0, 0.0)
    basic = [c for c in costs if c.kind != "zcdp"]
    eps_basic = math.fsum(c.epsilon for c in basic)
    delta_basic = math.fsum(c.delta for c in basic)
    rho = math.fsum(c.rho for c in costs if c.kind == "zcdp")
    delta_left = budget.delta - delta_basic
    if rho == 0:
        spent = eps_basic if delta_left >= 0 else math.inf
    else:
        spent = eps_basic + cdp_eps(rho, delta_left) if delta_left > 0 else math.inf
    remaining = max(budget.total - spent, 0.0)
    eps_left = budget.total - eps_basic
    remaining_rho = (max(cdp_rho(eps_left, delta_left) - rho, 0.0)
                     if eps_left > 0 and delta_left > 0 else 0.0)
    return Spent(budget, spent, remaining, remaining_rho, eps_basic, delta_basic, rho)


def admits(budget: Budget, costs: Iterable[Cost], request: Cost) -> tuple[Spent, Spent, bool]:
    """(composition before, composition with ``request``, whether it fits the total)."""
    costs = list(costs)
    before = composed(budget, costs)
    after = composed(budget, [*costs, request])
    if budget.unit == "epsilon-delta" and after.basic_delta > budget.delta * (1 + SLACK):
        return before, after, False
    return before, after, after.spent <= budget.total * (1.0 + SLACK)


def refusal(name: str, budget: Budget, before: Spent, after: Spent, request: Cost,
            at_delta: float = 1e-6) -> str:
    """The one-line refusal: ``spent / requested / total`` in the budget's unit, then what
    still fits: ``remaining: rho = 0.75 = eps 3.9 at delta = 1e-06`` (a rho budget, its
    remaining rho also as the eps of an (eps, delta) guarantee at ``at_delta``), ``remaining:
    eps = 0.5`` (pure), ``remaining: eps = 0.5 at delta = 1e-06`` (an (eps, delta) total)."""
    asked = after.spent - before.spent
    unit = (f"eps at delta={budget.delta:.3g}" if budget.unit == "epsilon-delta"
            else {"rho": "rho", "epsilon": "eps"}[budget.unit])
    if budget.unit == "rho":
        left = (f"rho = {before.remaining_rho:.6g} = eps "
                f"{before.remaining_epsilon(at_delta):.6g} at delta = {at_delta:.3g}")
    elif budget.unit == "epsilon":
        left = f"eps = {before.remaining:.6g}"
    else:
        left = f"eps = {before.remaining:.6g} at delta = {budget.delta:.3g}"
    return (f"budget: refused: data set {name!r} has spent {before.spent:.6g} / requested "
            f"{asked:.6g} ({request.describe()}) / total {budget.total:.6g} "
            f"({unit}); nothing was released; remaining: {left}")
