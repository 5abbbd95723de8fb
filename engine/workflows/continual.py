"""The price of continual release: a cumulative count published every period, or once.

An agency that publishes cases-to-date every month must fix each month's noise when it
publishes that month: its strategy may use only the months so far (it is causal, a lower
triangular factorisation of the prefix-sum workload). The *online* mechanisms are those
strategies; their registered names start with ``online-``. Publishing once, after the last
period, lets an *offline* mechanism (HDMM OPT_0, Eigen-Design, the hierarchical ones, ...)
measure anything. On the same prefix-sum workload and privacy level, the best online RMSE
divided by the best offline RMSE is the price of publishing every period: 1.0 would mean
publishing as you go costs nothing.

:func:`price_of_continual_release` reads that price off a finished
:class:`~engine.workflows.compare.Comparison`; :func:`continual_spec` is the scenario of a
count published every period (the explorer's "published every month" preset).

Example:
    >>> from engine.workflows.compare import compare
    >>> price = price_of_continual_release(compare(continual_spec(16),
    ...                                            mechanisms=["identity", "h2"]))
    >>> price.offline.mechanism, price.online is None
    ('h2', True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from engine import plotting
from engine.analysis.continual import prefix_horizon
from engine.analysis.per_query_error import error_half_widths
from engine.errors import NotApplicable
from engine.mechanisms import registry_names
from engine.workflows.compare import LEVEL, Comparison, ComparisonRow
from engine.workloads.workload import Workload

#: Registered names of online (causal) mechanisms start with this.
ONLINE_PREFIX = "online-"
#: Periods of the explorer's preset: a count published every month for ten years.
MONTHS = 120


def continual_spec(periods: int = MONTHS, name: str = "month") -> dict[str, Any]:
    """The scenario spec (``domain:`` and ``workload:``) of a cumulative count published every
    period: one ordered attribute of ``periods`` values, every prefix sum of it.

    Raises:
        ValueError: ``periods`` below 1 (the message names it).
    """
    if int(periods) < 1:
        raise ValueError(f"periods: must be at least 1 (got {periods})")
    return {"domain": {name: {"size": int(periods), "kind": "numeric"}},
            "workload": [{"product": {name: "prefix"}}]}


def is_online(mechanism: str) -> bool:
    """True for an online (causal) mechanism's registered name."""
    return mechanism.startswith(ONLINE_PREFIX)


def online_mechanisms() -> tuple[str, ...]:
    """The registered online mechanisms (none before a family registers one)."""
    return tuple(name for name in registry_names() if is_online(name))


def is_continual(workload: Workload) -> bool:
    """True when the workload is the prefix sums of one ordered attribute (time): the one
    workload online mechanisms answer (see :func:`engine.analysis.continual.prefix_horizon`)."""
    try:
        prefix_horizon(workload)
    except NotApplicable:
        return False
    return True


def _best(rows: list[ComparisonRow]) -> ComparisonRow | None:
    planned = [r for r in rows if r.rmse is not None]
    return min(planned, key=lambda r: r.rmse) if planned else None


@dataclass(frozen=True)
class ContinualPrice:
    """What publishing every period costs against publishing once, read from a comparison.

    Attributes:
        comparison: the comparison on a prefix-sum workload (see :func:`is_continual`).
        offline: the best applicable offline mechanism's row (least RMSE), None if none.
        online: the best applicable online mechanism's row, None if none was planned.
        level: the confidence level of the errors in people (0.95).
    """

    comparison: Comparison
    offline: ComparisonRow | None
    online: ComparisonRow | None
    level: float = LEVEL

    @property
    def period(self) -> str:
        """The name of the ordered attribute, e.g. ``"month"``."""
        return self.comparison.workload.domain.names[0]

    @property
    def periods(self) -> int:
        """How many periods (prefix sums) there are."""
        return self.comparison.workload.num_queries

    @property
    def ratio(self) -> float | None:
        """Best online RMSE / best offline RMSE (None unless both exist): the price of
        publishing every period; the same ratio holds for the errors in people at 95 %
        under Gaussian noise."""
        if self.online is None or self.offline is None or not self.offline.rmse:
            return None
        return self.online.rmse / self.offline.rmse

    def rows(self) -> tuple[ComparisonRow, ...]:
        """The applicable rows, online ones first, each group best first."""
        ranked = [r for r in self.comparison.ranked() if r.rmse is not None]
        return tuple(sorted(ranked, key=lambda r: not is_online(r.mechanism)))

    def per_period(self) -> pd.DataFrame:
        """Each period's error in people: column ``period`` (1..n), then one column per
        applicable mechanism (:meth:`rows` order): the cumulative count published for that
        period is within +/- this many people of the truth with probability :attr:`level`
        (the exact Gaussian quantile; for Laplace noise a Chernoff bound)."""
        table: dict[str, np.ndarray] = {"period": np.arange(1, self.periods + 1)}
        for row in self.rows():
            half_widths, _ = error_half_widths(row.plan, self.level)
            table[row.mechanism] = np.asarray(half_widths, dtype=float)
        return pd.DataFrame(table)

    def summary(self) -> pd.DataFrame:
        """One row per applicable mechanism (:meth:`rows` order): ``mechanism``, ``online``,
        ``rmse`` (people), ``max_error`` and ``last_error`` (people at :attr:`level`: the
        worst period and the last one), ``ratio_to_offline`` (RMSE / the offline optimum's)
        and ``ratio_to_bound`` (RMSE / the SVD bound)."""
        per_period = self.per_period()
        best = self.offline.rmse if self.offline is not None else None
        bound = self.comparison.bound_rmse
        records = [{"mechanism": r.mechanism, "online": is_online(r.mechanism),
                    "rmse": r.rmse, "max_error": float(per_period[r.mechanism].max()),
                    "last_error": float(per_period[r.mechanism].iloc[-1]),
                    "ratio_to_offline": r.rmse / best if best else math.nan,
                    "ratio_to_bound": r.rmse / bound if bound else math.nan}
                   for r in self.rows()]
        return pd.DataFrame.from_records(records, columns=[
            "mechanism", "online", "rmse", "max_error", "last_error", "ratio_to_offline",
            "ratio_to_bound"])

    def plot(self) -> Any:
        """A HoloViews picture (needs HoloViews): each period's error in people at 95 % (see
        :meth:`per_period`), one curve per mechanism, on log-log axes."""
        table = self.per_period()
        return plotting.error_curves({str(c): table[c].tolist() for c in table.columns},
                                     x="period", y="error_95",
                                     title=f"Error of each {self.period}'s cumulative count "
                                           "(+/- people, 95 %)")

    def headline(self, markdown: bool = False) -> str:
        """The price in one plain sentence, or why it cannot be given (``markdown``: the
        mechanisms and the ratio in bold)."""
        b = "**" if markdown else ""
        every = f"every {self.period}"
        if self.offline is None:
            return (f"No offline mechanism could be planned on these {self.periods:,} "
                    "cumulative counts, so there is nothing to measure publishing "
                    f"{every} against.")
        once = (f"offline optimum: {b}{self.offline.mechanism}{b}, RMSE "
                f"{self.offline.rmse:,.2f} people")
        if self.online is not None and self.ratio is not None:
            return (f"Publishing {every} costs {b}{self.ratio:.2f} times{b} the error of "
                    f"publishing once ({once}; best online: {b}{self.online.mechanism}{b}, "
                    f"RMSE {self.online.rmse:,.2f} people).")
        refused = [r for r in self.comparison.rows if is_online(r.mechanism) and r.error]
        if refused:
            return (f"No online mechanism applies here ({refused[0].error}), so the price of "
                    f"publishing {every} cannot be shown; publishing once, the {once}.")
        registered = online_mechanisms()
        if not registered:
            return ("No online mechanism is registered in this workbench, so the price of "
                    f"publishing {every} cannot be shown yet; publishing once, the {once}.")
        return (f"No online mechanism has been planned in this comparison (registered: "
                f"{', '.join(registered)}), so the price of publishing {every} cannot be "
                f"shown yet; publishing once, the {once}.")


def price_of_continual_release(comparison: Comparison, level: float = LEVEL) -> ContinualPrice:
    """The price of publishing every period: the best online mechanism of ``comparison``
    against its best offline one (the offline optimum), at the comparison's privacy level.

    Args:
        comparison: a comparison on the prefix sums of one ordered attribute.
        level: the confidence level of the errors in people.

    Raises:
        ValueError: a workload that is not the prefix sums of one ordered attribute (one
            line naming it).
    """
    if not is_continual(comparison.workload):
        raise ValueError(f"workload: continual release needs the prefix sums of one ordered "
                         f"attribute, got {comparison.workload.describe()}")
    online = [r for r in comparison.rows if is_online(r.mechanism)]
    offline = [r for r in comparison.rows if not is_online(r.mechanism)]
    return ContinualPrice(comparison, _best(offline), _best(online), level)
