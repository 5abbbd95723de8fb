"""Publishable tables of an AIM+GReM release: the same kind as a matrix mechanism's.

AIM+GReM releases one raw GReM-MLE estimate per workload marginal (fractional, possibly
negative; every table a margin of one residual estimate, so they already agree).
:func:`adaptive_tables` turns them into one table per workload marginal, cells named in the
domain's values, whole non-negative counts that agree across tables. For 1- and 2-way
marginals (the default ``auto``) by raking (:func:`engine.workflows.marginal_fit.rake_marginals`:
negative cells set to 0, each 1-way table scaled to the total, each 2-way table scaled to its
two 1-way tables by iterative proportional fitting, then rounded keeping them): on the
Adaptive page's default Adult release more accurate than the least-squares fits below and
under a fiftieth of the cost of one count per cell (``benchmarks/release_postprocess.py
--adaptive-only --compare``, issue 28). Otherwise, or when asked (``fit_space``), by a
least-squares route of :func:`engine.workflows.tables.publishable_tables`, e.g. the census
TopDown one: one non-negative estimate of the data vector fitted to the released marginals
(each cell weighted by the inverse of its estimate's noise variance), rounded to whole counts
that keep its total, every table a sum of that one integer vector. Post-processing only: no
privacy cost.

The margins are those of the raw estimate, from the noise of the residuals that were
measured (``sum v_tau / lambda_tau``, the variance GReM-MLE reports, spec 3.5). A marginal
whose every residual was measured has an unbiased raw estimate and the margin is its 95 %
interval; a residual never measured is set to zero, a bias no noise margin covers: the method
names the tables where that happens.

Example:
    >>> from engine.data import Dataset
    >>> from engine.domain import Domain
    >>> from engine.mechanisms import get
    >>> from engine.privacy import Privacy
    >>> from engine.workloads import Workload
    >>> d = Domain.from_spec({"sex": {"labels": ["female", "male"]}, "smoker": 2})
    >>> w = Workload.marginals(d, k=1)
    >>> data = Dataset.synthetic(d, 300, rng=0)
    >>> result = get("aim-grem").run(w, Privacy(noise="zcdp", rho=1.0), data,
    ...                              np.random.default_rng(0))
    >>> tables = adaptive_tables(w, result)
    >>> list(tables.frames["sex"].columns)
    ['sex', 'estimate', 'margin_95', 'raw']
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.workflows.marginal_fit import fits_marginals, rake_marginals, tables_agree
from engine.workflows.tables import (
    MARGIN_Z,
    WORK_LIMIT,
    PublishedTables,
    check_publishing,
    publishable_tables,
)
from engine.workloads.workload import Workload

#: The exact discrete Gaussian sampler's variance exceeds the nominal one by less than this
#: factor (:func:`engine.mechanisms.aim_grem.grem.residual_noise`).
SAMPLER_VARIANCE_FACTOR = 1.002


def adaptive_tables(workload: Workload, result: Any, *, post_process: str = "consistent",
                    work_limit: float | None = WORK_LIMIT,
                    fit_space: str = "auto") -> PublishedTables:
    """One labelled table per workload marginal of an AIM+GReM ``result``
    (:class:`~engine.mechanisms.aim_grem.result.AdaptiveResult` with ``cell_variance`` and
    ``unmeasured`` in its details): ``estimate`` (whole non-negative counts that agree
    across tables), ``margin_95`` and ``raw`` (the GReM-MLE estimate).

    Args:
        workload: the released marginal workload.
        result: the mechanism's output.
        post_process: ``consistent`` or ``raw`` (the raw estimates and their margins only).
            A domain too large to hold one count per cell gets its consistent counts from a
            fit of the tables themselves (1- and 2-way), a graphical model (the ``pgm``
            extra), or publishes ``raw`` and says why (:func:`publishable_tables`).
        work_limit: the non-negative fit's budget (:func:`publishable_tables`; not used by
            raking).
        fit_space: ``auto`` (raking for 1- and 2-way marginals whose raw tables agree, as
            GReM-MLE's do; else :func:`publishable_tables`' own choice), or ``cells``,
            ``marginals`` or ``three-way`` (:func:`publishable_tables`).

    Returns:
        The tables and their method in words.

    Raises:
        SpecError: an unknown post-processing or fit space, naming the field.
    """
    check_publishing(post_process, fit_space)
    variance = result.details["cell_variance"]
    unmeasured = result.details["unmeasured"]
    raw, per_query = [], []
    for term in workload.terms:
        weight = term.weight if term.weight else 1.0
        raw.append(weight * np.asarray(result.estimates[term.attrs], float).reshape(-1))
        # the exact sampler's variance is at most this factor above the nominal one
        cell = SAMPLER_VARIANCE_FACTOR * float(variance[term.attrs])
        per_query.append(np.full(term.num_queries, weight ** 2 * cell))
    answers, variances = np.concatenate(raw), np.concatenate(per_query)
    biased = [result.label(g) for g in dict.fromkeys(t.attrs for t in workload.terms)
              if unmeasured[g]]
    shape = workload.domain.shape
    estimates = {t.attrs: np.asarray(result.estimates[t.attrs], float).reshape(
        [shape[a] for a in t.attrs]) for t in workload.terms}
    rake = (post_process == "consistent" and fit_space == "auto" and fits_marginals(workload)
            and tables_agree(estimates))
    tables = publishable_tables(
        workload, strategy=None, measurements=answers, noise_variances=variances, total=None,
        per_query_variance=variances, post_process="raw" if rake else post_process,
        noise="zcdp", raw=answers, raw_column=True, work_limit=work_limit,
        margin_note=_margin_note(biased), fit_space=fit_space)
    if rake:
        return _raked(workload, estimates, tables.frames, _margin_note(biased))
    method = tables.method.replace("the released workload answers",
                                   "the released GReM-MLE marginals")
    return PublishedTables(tables.frames, method)


def _raked(workload: Workload, estimates: dict[tuple[int, ...], np.ndarray],
           frames: dict[str, Any], margin_note: str) -> PublishedTables:
    """The raw tables' ``frames`` (one per term, in order) with the raked whole counts as
    their ``estimate`` column, and the method."""
    fit = rake_marginals(estimates)
    for frame, term in zip(frames.values(), workload.terms, strict=True):
        frame.insert(frame.columns.get_loc("margin_95"), "estimate",
                     fit.over(term.attrs).reshape(-1))
    kept = "the GReM-MLE estimate of the total (not public), rounded"
    route = fit.describe("the released GReM-MLE marginals", kept)
    return PublishedTables(frames, f"consistent: {route}. Post-processing only: it costs no "
                                   f"privacy. {margin_note}.")


def _margin_note(biased: list[str]) -> str:
    z = MARGIN_Z["zcdp"]
    note = (f"margin_95: half-width of the 95 % interval, {z:.2f} standard deviations of the "
            "noise in the raw GReM-MLE estimate (its per-cell variance sum v_tau / lambda_tau "
            "over the residuals measured, from the measurements' noise variances, raised by "
            f"{SAMPLER_VARIANCE_FACTOR - 1:.1%} to cover the exact discrete Gaussian sampler); "
            "it holds for the raw estimate, not for the rounded counts")
    if biased:
        note += (f"; in {', '.join(biased)} some residuals were never measured and are set "
                 "to zero: there the raw estimate is biased by those residuals, which the "
                 "margin (noise only) does not cover")
    else:
        note += "; every residual of every table was measured, so the raw estimate is unbiased"
    return note
