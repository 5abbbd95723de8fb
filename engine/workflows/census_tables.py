"""Publishable tables of a census hierarchy release (``hierarchical-pgsr``).

One table per level of the region tree, named after the level (``nation``, ``state``,
``county``): a column per geographic level from the root down to it, holding the regions'
names, a ``size`` column (the group-size bucket, ``6+`` for an open top), then

* ``estimate``: the variant's released counts when they are whole and non-negative (the
  consistent variants ``dp``, ``cdp``, ``chain``, ``topdown``; the relaxed QP's rounding);
  ``fitted`` instead when they are not whole (``gls``: real, possibly negative);
* ``margin_95``: the exact 95 % half-width of the noise in ``raw`` (from the level's noise
  kind and scale, :func:`~engine.mechanisms.hierarchical.level_noise.halfwidth_95`);
* ``raw``: the unbiased noisy count of the cell, recovered from what the level measured
  (its histogram, or the difference of two cumulative / prefix entries).

The method states, from the published values themselves
(:func:`~engine.mechanisms.hierarchical.model.check_release`), whether every parent equals the
sum of its children, whether the counts are whole and non-negative: a variant never claims a
consistency its output does not have.

Example:
    >>> from engine.mechanisms.hierarchical import HierarchicalPGSR
    >>> from engine.mechanisms.hierarchical.synthetic import synthetic_census
    >>> h = synthetic_census("levels=1,2,4;groups=200;max_size=3;seed=0")
    >>> mech = HierarchicalPGSR(variant="dp")
    >>> m = mech.measure(h, 1.0, np.random.default_rng(0))
    >>> r = mech.postprocess(h.tree, h.sizes, h.total, m)
    >>> tables = hierarchy_tables(r, m)
    >>> [int(f["estimate"].sum()) for f in tables.frames.values()]
    [200, 200, 200]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from engine.mechanisms.hierarchical.cumulative import decumulate
from engine.mechanisms.hierarchical.level_noise import halfwidth_95
from engine.workflows.tables import MARGIN_DECIMALS, PublishedTables

#: What the raw count of a cell is, per measurement.
RAW_FROM = {
    "plain": "the level's noisy histogram itself (one noise draw per cell)",
    "cumulative": "the difference of two neighbouring noisy cumulative entries of its region "
                  "(one draw for the first size bucket)",
    "chain": "the difference of two neighbouring noisy level-wide prefix sums (one draw for "
             "the first cell of the level)",
}


def hierarchy_tables(released: Any, measurement: Any) -> PublishedTables:
    """The tables of a released hierarchy.

    Args:
        released: the variant's :class:`~engine.mechanisms.hierarchical.model.Release`.
        measurement: the noisy measurement it was post-processed from
            (:class:`~engine.mechanisms.hierarchical.mechanism.NoisyMeasurement`).

    Returns:
        One table per level (root first) and the method in words.
    """
    tree, sizes, plan = released.tree, released.sizes, measurement.plan
    levels = [np.asarray(a) for a in released.levels]
    whole = all(np.array_equal(a, np.round(a)) and (a >= 0).all() for a in levels)
    column = "estimate" if whole else "fitted"
    frames: dict[str, pd.DataFrame] = {}
    geography = tree.level_names
    for lev, values in enumerate(levels):
        regions, k = values.shape
        paths = [tree.path(lev, r) for r in range(regions)]
        columns: dict[str, Any] = {
            geography[j]: np.repeat([p[j] for p in paths], k) for j in range(lev + 1)}
        columns["size"] = np.tile(sizes.labels, regions)
        columns[column] = (values.astype(np.int64) if whole else values.astype(float)
                           ).reshape(-1)
        raw, draws = _raw(plan.measurement, measurement.values[lev])
        scale = float(plan.scales[lev])
        margin = np.where(draws == 1, halfwidth_95(plan.kind, scale, 1),
                          halfwidth_95(plan.kind, scale, 2))
        columns["margin_95"] = np.round(margin.reshape(-1), MARGIN_DECIMALS)
        columns["raw"] = raw.reshape(-1)
        frames[geography[lev]] = pd.DataFrame(columns)
    return PublishedTables(frames, _method(released, plan, column))


def _raw(measurement: str, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per cell ``(regions, buckets)``: the unbiased noisy count and how many noise draws it
    holds (1, or 2 for a difference)."""
    values = np.asarray(values, dtype=float)
    if measurement == "plain":
        return values, np.ones(values.shape, dtype=int)
    if measurement == "cumulative":
        draws = np.full(values.shape, 2)
        draws[:, 0] = 1
        return decumulate(values), draws
    buckets, regions = values.shape  # chain: level-wide prefixes, size-major (k, regions)
    raw = np.diff(values.reshape(-1), prepend=0.0).reshape(buckets, regions).T
    draws = np.full(raw.shape, 2)
    draws[0, 0] = 1
    return raw, draws


def _method(released: Any, plan: Any, column: str) -> str:
    checks = released.checks
    title = released.report.get("title", released.variant)
    facts = []
    if checks["violations"] == 0:
        facts.append("consistent: every parent count equals the sum of its children's and "
                     f"every level sums to the public number of groups n = {released.total:,}")
    else:
        facts.append(f"NOT consistent: {checks['consistency']:,} parent counts differ from the "
                     "sum of their children's"
                     + (", and the root does not sum to the public n" if checks["faithfulness"]
                        else ""))
    facts.append("whole counts" if checks["non_integer"] == 0 else
                 f"not whole counts ({checks['non_integer']:,} fractional values, in column "
                 f"'{column}')")
    facts.append("non-negative" if checks["negative"] == 0 else
                 f"{checks['negative']:,} negative values")
    kind = "double-geometric (integer)" if plan.kind == "geometric" else (
        "discrete Laplace on the grid 2**-10")
    return (f"{released.variant}: {title}, the variant's own post-processing of the noisy "
            f"level histograms (post-processing only: no privacy cost). The published "
            f"'{column}' column is {'; '.join(facts)}. margin_95: the exact 95 % half-width of "
            f"the noise in 'raw' ({RAW_FROM[plan.measurement]}), from the level's {kind} "
            "noise scale (scale_by_level in the record); it holds for raw, not for the "
            "post-processed counts.")
