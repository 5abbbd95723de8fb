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

from engine import Plan, chernoff_half_width, gaussian_half_width, typical_half_width

#: The confidence level of every error in people the pages show (95 %).
PEOPLE_LEVEL = 0.95
#: Laplace plans of more queries than this show the Chernoff bound as a typical query's error
#: in people: the exact one needs every query's variance (on Adult's 21 million queries,
#: seconds per plan).
EXACT_PEOPLE_QUERIES = 100_000
#: A Gaussian error's 95 % half-width over its standard deviation (1.96).
GAUSSIAN_FACTOR = float(gaussian_half_width(1.0, PEOPLE_LEVEL))


def people_factor(plan: Plan) -> tuple[float, str]:
    """A typical count's 95 % half-width over the plan's RMSE, and how it was obtained (a key
    of ``engine.METHODS``): the same at every privacy level of the plan's noise family. For a
    Laplace plan it is computed once, where the plan was made (:func:`prepare_for_pages`), and
    kept with it; above :data:`EXACT_PEOPLE_QUERIES` queries it is the Chernoff bound."""
    if plan.privacy.noise != "laplace":
        return GAUSSIAN_FACTOR, "gaussian"
    if plan.workload.num_queries > EXACT_PEOPLE_QUERIES:
        return float(chernoff_half_width(1.0, PEOPLE_LEVEL)), "chernoff"
    rmse = plan.rmse()
    half_width, method = typical_half_width(plan, PEOPLE_LEVEL)
    return (half_width / rmse if rmse > 0 else GAUSSIAN_FACTOR), method


def prepare_for_pages(plan: Plan | None) -> None:
    """Compute :func:`people_factor` of ``plan`` where the plan is made, so that it is kept
    with the plan (nothing for a plan that has it, or for one that needs no computing)."""
    if plan is not None:
        people_factor(plan)
