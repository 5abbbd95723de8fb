"""Errors in people, computed where a plan is made rather than in the web process.

Every page shows a plan's typical error in people at 95 % (the Compare table and chart, for
every row as soon as it arrives). For a Laplace plan that needs every query's variance and one
query's mix of Laplace terms: seconds of CPU for a workload of a thousand cells, which in the
web process would hold every session of the process. :func:`prepare_for_pages` computes it
where the plan is made (a planner process, a planner thread, a Dask worker's result on its
arrival) and keeps it with the plan (:meth:`engine.Plan.noise_free`), which carries it back
from a worker process and into the shared plan cache.

Nothing here imports Panel (the planner processes import this module).
"""

from __future__ import annotations

from engine import Plan, typical_half_width

#: The confidence level of every error in people the pages show (95 %).
PEOPLE_LEVEL = 0.95
#: Laplace plans of more queries than this show the Chernoff bound as a typical query's error
#: in people: the exact one needs every query's variance (on Adult's 21 million queries,
#: seconds per plan).
EXACT_PEOPLE_QUERIES = 100_000


def prepare_for_pages(plan: Plan | None) -> None:
    """Compute a Laplace plan's typical error in people at :data:`PEOPLE_LEVEL` (up to
    :data:`EXACT_PEOPLE_QUERIES` queries) and keep it with the plan; nothing for other plans,
    and nothing again for a plan that has it."""
    if (plan is not None and plan.privacy.noise == "laplace"
            and plan.workload.num_queries <= EXACT_PEOPLE_QUERIES):
        typical_half_width(plan, PEOPLE_LEVEL)
