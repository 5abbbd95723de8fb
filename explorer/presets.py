"""The builder's presets menu: shapes over the user's attributes, and the catalogue's workloads.

Generic presets (k-way marginals, prefix-marginals, range queries) apply to the attributes the
user has already defined, or to a small demo domain when there are none. The others are the
entries of :mod:`engine.workloads.catalog`, where the papers' workloads (the classic 1-D
examples, census SF1 / SF1+, CPS, Adult, Loans) are defined. Every preset builds a plain
scenario spec (see the README) with a default privacy level.

Example:
    >>> spec = build_preset("cps_marginals")
    >>> from engine.scenario import Scenario
    >>> Scenario.from_spec(spec).workload.num_queries
    618120
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine import catalog, continual_spec

Spec = dict[str, Any]

#: Used by the generic presets when the user has not defined any attribute yet.
DEMO_DOMAIN: Spec = {
    "age": {"size": 32, "kind": "numeric"},
    "income": {"size": 16, "kind": "numeric"},
    "sex": {"size": 2, "labels": ["F", "M"]},
}

GAUSSIAN = {"noise": "gaussian", "epsilon": 1.0, "delta": 1.0e-6}


@dataclass(frozen=True)
class Preset:
    """A named way to fill the builder.

    Attributes:
        key: identifier used in code and tests.
        title: menu label.
        description: one or two plain sentences for the builder.
        build: ``(current domain spec or None, k) -> spec`` with ``domain`` and ``workload``.
        uses_domain: True when the preset applies to the user's attributes.
    """

    key: str
    title: str
    description: str
    build: Callable[[Spec | None, int], Spec]
    uses_domain: bool = False


def _domain_or_demo(domain: Spec | None) -> Spec:
    return dict(domain) if isinstance(domain, Mapping) and domain else dict(DEMO_DOMAIN)


def _catalog_preset(entry: catalog.Entry) -> Preset:
    return Preset(entry.key, entry.title, entry.description, lambda domain, k: entry.build())


PRESETS: dict[str, Preset] = {
    p.key: p
    for p in (
        Preset(
            "kway",
            "All k-way marginals (your attributes)",
            "Counts for every combination of k attributes, e.g. all two-way tables.",
            lambda domain, k: catalog.kway_marginals(_domain_or_demo(domain), k),
            uses_domain=True,
        ),
        Preset(
            "prefix_marginals",
            "Prefix-marginals (your attributes)",
            "Like k-way marginals, but cumulative ('at most v') on numeric attributes.",
            lambda domain, k: catalog.prefix_marginals(_domain_or_demo(domain), k),
            uses_domain=True,
        ),
        Preset(
            "ranges",
            "Range queries (your attributes)",
            "Every interval [a, b] of each numeric attribute, for each value of the others.",
            lambda domain, k: catalog.range_queries(_domain_or_demo(domain)),
            uses_domain=True,
        ),
        Preset(
            "published_every_month",
            "Published every month: counts to date over 120 months",
            "A count to date (cases, claims) published every month for ten years: the 120 "
            "cumulative counts of one ordered attribute, month. The Compare page shows what "
            "publishing every month costs against publishing once.",
            lambda domain, k: continual_spec(),
        ),
        *(_catalog_preset(entry) for entry in catalog.CATALOG.values()),
    )
}


def build_preset(key: str, domain: Spec | None = None, k: int = 2) -> Spec:
    """The scenario spec of preset ``key``, with Gaussian noise at eps = 1, delta = 1e-6.

    Args:
        key: one of :data:`PRESETS`.
        domain: the user's current ``domain:`` spec (used by the generic presets).
        k: marginal order for the k-way presets.

    Raises:
        KeyError: for an unknown key (the message lists the known ones).
    """
    if key not in PRESETS:
        raise KeyError(f"preset: unknown {key!r}; known: {', '.join(PRESETS)}")
    return {**PRESETS[key].build(domain, k), "privacy": dict(GAUSSIAN)}
