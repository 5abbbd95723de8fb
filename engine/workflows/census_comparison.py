"""The matrix mechanisms on the census hierarchy's queries, beside the hierarchical release.

:func:`matrix_mechanism_rmse` plans any registered mechanism (HDMM, Eigen-Design, identity,
...) by name on the PGSR queries of a region hierarchy
(:func:`engine.mechanisms.hierarchical.bridge.hierarchical_workload`), under the individual or
the group privacy unit, so that its expected RMSE can stand next to the PGSR variants at the
same eps. It reaches every family through the registry, so it sits in the workflows layer,
above the families.

Example (spec R2 on the running example):
    >>> from engine.mechanisms.hierarchical.synthetic import running_example
    >>> h = running_example()
    >>> r = matrix_mechanism_rmse(h.tree, h.sizes, "identity", 1.0)
    >>> r["unit"], r["coordinates"], r["queries"]
    ('individual', 'cumulative', 9)
"""

from __future__ import annotations

from typing import Any

from engine.errors import SpecError
from engine.mechanisms import get
from engine.mechanisms.hierarchical.bridge import hierarchical_workload
from engine.mechanisms.hierarchical.model import RegionTree, SizeSet
from engine.privacy import Privacy

#: the neighbouring relations a comparison may use (see the bridge's module docstring)
PRIVACY_UNITS = ("individual", "group")


def matrix_mechanism_rmse(tree: RegionTree, sizes: SizeSet, mechanism: str, epsilon: float,
                          unit: str = "individual") -> dict[str, Any]:
    """Plan an engine mechanism (hdmm, eigen-design, identity, ...) for the PGSR queries.

    ``individual``: the mechanism plans for ``W_y`` over cumulative counts, where the
    ordinary L1 sensitivity is exactly the individual-level sensitivity, so its RMSE is
    comparable with the PGSR variants at the same eps. ``group``: it plans for ``W`` over
    counts (one whole group added or removed per neighbour).

    Returns:
        ``mechanism``, ``unit``, ``rmse`` (expected, per (size, region) query), ``queries``.
    """
    if unit not in PRIVACY_UNITS:
        raise SpecError(f"unit: unknown {unit!r}; allowed: {', '.join(PRIVACY_UNITS)}")
    coordinates = "cumulative" if unit == "individual" else "counts"
    workload = hierarchical_workload(tree, sizes, coordinates)
    plan = get(mechanism).plan(workload, Privacy(noise="laplace", epsilon=epsilon))
    return {"mechanism": mechanism, "unit": unit, "coordinates": coordinates,
            "rmse": plan.rmse(), "queries": workload.num_queries}
