"""What the planning, session and server tests share: a small scenario and a stand-in for
``engine.workflows.compare.compare`` that plans each mechanism with a given behaviour."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.analysis.svd_bound import svd_bound
from engine.workflows.compare import Comparison, ComparisonRow

#: Prefix sums over 16 values, pure eps 1, two quick mechanisms.
PREFIX_SPEC = {
    "domain": {"x": {"size": 16, "kind": "numeric"}},
    "workload": [{"product": {"x": "prefix"}}],
    "privacy": {"noise": "laplace", "epsilon": 1.0},
    "mechanisms": ["identity", "h2"],
}


def fake_compare(behaviour: Callable[[str, Any], Any]) -> Callable[..., Comparison]:
    """A stand-in for ``compare`` that calls ``behaviour(name, progress)`` for each mechanism
    and reports its plan (None: "not applicable") as a row."""

    def fake(workload, privacy, mechanisms, params=None, progress=None, on_row=None,
             executor=None):  # noqa: ANN001, ANN202 -- compare's signature
        for name in mechanisms:
            plan = behaviour(name, progress)
            row = ComparisonRow(name, name, plan, None if plan else "not applicable: x", 0.0)
            on_row(row)
        return Comparison(workload, privacy, svd_bound(workload), ())

    return fake
