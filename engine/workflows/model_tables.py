"""Consistent whole counts from a graphical model, for domains too large to hold one count per
cell: the `mbi` route of :func:`engine.workflows.tables.publishable_tables`.

The released marginal tables (their raw unbiased answers, each cell weighted by the inverse of
its noise variance) are fitted by a Markov random field whose cliques are the tables' attribute
sets (Private-PGM: McKenna, Sheldon & Miklau 2019, the ``mbi`` package, mirror descent). Two
routes, both holding tables over the cliques only, never the domain:

* **exact**, when the model's junction tree fits in memory: its clique marginals are rounded to
  whole counts along the junction tree, the first clique by largest remainders to the total,
  every next clique within each value of the separator it shares with the clique before it, to
  that separator's whole counts. Neighbouring cliques then agree exactly on their separators,
  so (running intersection) any two tables summed from the rounded cliques agree on every
  attribute they share, and all share one total;
* **approximate**, when the junction tree would not fit but every table is 1- or 2-way (the
  usual all-pairs workload, whose junction tree is the whole domain): pseudo-marginals from
  mirror descent with convex generalized belief propagation (McKenna et al. 2021, "Relaxed
  marginal consistency"), nearly consistent; each attribute's 1-way table is their mean,
  rounded to the total by largest remainders, and each 2-way table is scaled to its two whole
  1-way tables and rounded cell by cell up or down keeping both
  (:func:`engine.workflows.table_rounding.controlled_round`), so the tables agree exactly.

Fitting and rounding read only the released answers: post-processing, no privacy cost.
``mbi`` (with JAX) is the optional ``pgm`` extra; nothing here imports it at module import.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import NotApplicable
from engine.workflows.table_rounding import controlled_round, round_within_groups
from engine.workloads.term import Term
from engine.workloads.workload import Workload

#: What a steward without the extra is told.
INSTALL_LINE = ("install the pgm extra (pip install 'dpworkbench[pgm]': mbi with JAX) to publish "
                "consistent whole counts from a graphical model instead")
#: Mirror-descent iterations of the model fit (mbi's default).
MODEL_ITERATIONS = 1000


@dataclass(frozen=True)
class ModelCounts:
    """Whole counts of a fitted graphical model, one table per junction-tree clique.

    Attributes:
        tables: clique (attribute indices in domain order) -> int64 counts over it (axes in
            that order); tables agree on every attribute they share.
        total: the one total every table sums to (counts).
        cells: cells the model holds (the cliques' sizes summed).
        iterations: mirror-descent iterations run.
        exact: exact inference on the junction tree (else approximate, 1- and 2-way tables).
    """

    tables: dict[tuple[int, ...], np.ndarray]
    total: int
    cells: int
    iterations: int
    exact: bool

    def describe(self, fitted: str, kept: str) -> str:
        """The route in words, for a release's method (``fitted``: what the model was fitted
        to; ``kept``: which total the tables keep)."""
        if self.exact:
            return (f"a graphical model (Private-PGM, the mbi package: {self.iterations} "
                    f"mirror-descent iterations) fitted to {fitted}, each cell weighted by the "
                    f"inverse of its noise variance, {kept} ({self.total:,}); the model holds "
                    f"{self.cells:,} cells, not the domain's. Its clique marginals are rounded "
                    "to whole counts along its junction tree (the first by largest remainders "
                    "to the total, each next one within every value of the attributes it "
                    "shares with the one before, to that value's whole count), so tables agree "
                    "on every attribute they share and share one total; every table sums one "
                    "rounded clique")
        return (f"an approximate graphical model (Private-PGM, the mbi package: "
                f"{self.iterations} mirror-descent iterations with convex generalized belief "
                f"propagation, whose marginals nearly agree) fitted to {fitted}, each cell "
                f"weighted by the inverse of its noise variance, {kept} ({self.total:,}); it "
                f"holds {self.cells:,} cells, not the domain's. Each attribute's 1-way table is "
                "the mean of the model's, rounded to the total by largest remainders; each "
                "2-way table is scaled to its two whole 1-way tables (iterative proportional "
                "fitting) and rounded cell by cell up or down keeping both (controlled "
                "rounding), so tables agree on every attribute they share and share one total")


def model_available() -> bool:
    """True when ``mbi`` and JAX can be imported (checked without importing them)."""
    return all(importlib.util.find_spec(m) is not None for m in ("mbi", "jax"))


def is_marginal(term: Term) -> bool:
    """A plain marginal table: a product of identity blocks over some attributes."""
    return term.is_product and all(f.is_identity() for f in term.factors or ())


def model_counts(workload: Workload, answers: np.ndarray, variances: np.ndarray, *,
                 total: int | None, max_cells: int,
                 iterations: int = MODEL_ITERATIONS) -> ModelCounts:
    """Fit a graphical model to the released marginal answers and round its cliques to whole
    counts that agree (module docstring).

    Args:
        workload: marginal tables only (:func:`is_marginal`), at least one over an attribute.
        answers: the raw (weighted) answers of every workload query, counts.
        variances: the noise variance of every (weighted) answer, squared counts.
        total: the public number of records, or None (the inverse-variance weighted mean
            of the tables' sums, rounded).
        max_cells: the most cells the model may hold.
        iterations: mirror-descent iterations.

    Raises:
        NotApplicable: ``mbi`` is missing, a table is not a plain marginal, or the junction
            tree would hold more than ``max_cells`` cells and the tables are not all 1- and
            2-way (one line saying which).
    """
    terms = workload.terms
    if not all(is_marginal(t) for t in terms) or not any(t.attrs for t in terms):
        raise NotApplicable("the graphical-model route takes plain marginal tables only")
    if not model_available():
        raise NotApplicable(INSTALL_LINE)
    mbi = _import_mbi()
    used = sorted({a for t in terms for a in t.attrs})
    names = [workload.domain.attributes[a].name for a in used]
    index = dict(zip(names, used, strict=True))
    domain = mbi.Domain(tuple(names), tuple(workload.domain.shape[a] for a in used))
    cliques = [tuple(workload.domain.attributes[a].name for a in sorted(t.attrs))
               for t in terms if t.attrs]
    cliques = list(dict.fromkeys(cliques))
    tree, _ = mbi.junction_tree.make_junction_tree(domain, cliques)
    cells = sum(domain.size(c) for c in tree.nodes)
    pairwise = all(len(c) <= 2 for c in cliques)
    region_cells = sum(domain.size(c) for c in cliques) + sum(domain.shape)
    if cells > max_cells and not (pairwise and region_cells <= max_cells):
        raise NotApplicable(f"a graphical model of these tables would hold {cells:,} cells, "
                            f"more than the {max_cells:,} that fit in memory")
    answers = np.asarray(answers, float).reshape(-1)
    variances = np.asarray(variances, float).reshape(-1)
    measurements = _measurements(mbi, workload, answers, variances)
    whole = int(total) if total is not None else _total(workload, answers, variances)
    exact = cells <= max_cells
    if exact:
        model = mbi.estimation.MirrorDescent().estimate(domain, measurements,
                                                        known_total=float(max(whole, 1)),
                                                        iters=iterations)
        tables = _rounded_cliques(tree, lambda c: _marginal(model, c), whole)
    else:
        cells = region_cells
        tables = _rounded_pairs(mbi, domain, measurements, cliques, whole, iterations)
    return ModelCounts({tuple(index[a] for a in c): t for c, t in tables.items()}, whole,
                       int(cells), int(iterations), exact)


def _total(workload: Workload, answers: np.ndarray, variances: np.ndarray) -> int:
    """The tables' sums averaged with inverse-variance weights (each sum's variance the sum
    of its cells'), rounded to a whole non-negative count."""
    sums, weights = [], []
    start = 0
    for term in workload.terms:
        stop = start + term.num_queries
        weight = term.weight if term.weight else 1.0
        sums.append(float(answers[start:stop].sum()) / weight)
        weights.append(weight**2 / max(float(variances[start:stop].sum()), 1e-300))
        start = stop
    return max(int(round(float(np.average(sums, weights=weights)))), 0)


def _rounded_pairs(mbi: Any, domain: Any, measurements: list[Any],
                   cliques: list[tuple[str, ...]], total: int, iterations: int
                   ) -> dict[tuple[str, ...], np.ndarray]:
    """Whole 1- and 2-way tables that agree, from pseudo-marginals of approximate inference
    (module docstring)."""
    loss = mbi.marginal_loss.from_linear_measurements(measurements, domain)
    known = float(max(total, 1))
    # mbi's exact mirror descent starts from this step (2 / (L n)); the approximate one has
    # no line search, and larger fixed steps diverge
    pseudo = mbi.approximate_oracles.mirror_descent(
        domain, loss, known_total=known, stepsize=2.0 / (loss.lipschitz * known),
        iters=iterations)
    names = list(domain.attributes)
    ones: dict[str, np.ndarray] = {}
    for a in names:
        means = [_marginal(pseudo, c).sum(axis=tuple(i for i, b in enumerate(c) if b != a))
                 for c in cliques if a in c]
        ones[a] = round_within_groups(np.mean(means, axis=0)[None, :], np.array([total]))[0]
    tables: dict[tuple[str, ...], np.ndarray] = {(a,): t for a, t in ones.items()}
    for c in cliques:
        if len(c) == 2:
            tables[c] = controlled_round(_marginal(pseudo, c), ones[c[0]], ones[c[1]])
    return tables


def _import_mbi() -> Any:
    import jax

    # counts need float64 (mbi warns, and stalls, in JAX's default float32)
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        import mbi
        import mbi.approximate_oracles  # noqa: F401 -- not imported by mbi's __init__
    return mbi


def _measurements(mbi: Any, workload: Workload, answers: np.ndarray,
                  variances: np.ndarray) -> list[Any]:
    """One mbi measurement per marginal table: its plain counts (weight divided out, axes in
    domain order) with their noise; cells of unequal variance are each scaled by the inverse
    of their standard deviation."""
    out = []
    start = 0
    for term in workload.terms:
        stop = start + term.num_queries
        if term.attrs:
            weight = term.weight if term.weight else 1.0
            shape = tuple(workload.domain.shape[a] for a in term.attrs)
            order = np.argsort(term.attrs)
            y = np.transpose((answers[start:stop] / weight).reshape(shape), order).reshape(-1)
            v = np.transpose((variances[start:stop] / weight**2).reshape(shape),
                             order).reshape(-1)
            clique = tuple(workload.domain.attributes[a].name for a in sorted(term.attrs))
            if np.all(v == v[0]):
                out.append(mbi.LinearMeasurement(y, clique, stddev=math.sqrt(float(v[0]))))
            else:
                scale = 1.0 / np.sqrt(v)
                out.append(mbi.LinearMeasurement(y * scale, clique, stddev=1.0,
                                                 query=mbi.WeightedQuery(scale)))
        start = stop
    return out


def _marginal(model: Any, clique: tuple[str, ...]) -> np.ndarray:
    """The model's (real, non-negative) marginal over ``clique``, axes in its order."""
    factor = model.project(clique)
    values = np.asarray(factor.datavector(flatten=False), dtype=float)
    axes = [list(factor.domain.attributes).index(a) for a in clique]
    return np.clip(np.transpose(values, axes), 0.0, None)


def _rounded_cliques(tree: Any, marginal: Any, total: int) -> dict[tuple[str, ...], np.ndarray]:
    """Whole counts over every clique of the junction ``tree`` (a networkx forest of
    attribute-name tuples), breadth first: each component's first clique rounded to ``total``
    (its separator is empty), every next clique within its separator's whole counts in the
    clique before it."""
    tables: dict[tuple[str, ...], np.ndarray] = {}
    for root in sorted(tree.nodes):
        if root in tables:
            continue
        tables[root] = _round_child(marginal(root), (), np.array(total))
        queue = [root]
        while queue:
            parent = queue.pop(0)
            for child in sorted(tree.neighbors(parent)):
                if child in tables:
                    continue
                separator = tuple(a for a in child if a in parent)
                kept = tuple(i for i, a in enumerate(parent) if a not in separator)
                tables[child] = _round_child(marginal(child),
                                             tuple(child.index(a) for a in separator),
                                             tables[parent].sum(axis=kept))
                queue.append(child)
    return tables


def _round_child(values: np.ndarray, separator: tuple[int, ...], targets: np.ndarray
                 ) -> np.ndarray:
    """``values`` rounded within each value of its ``separator`` axes to that value's whole
    count in ``targets`` (axes in the separator's order)."""
    rest = [i for i in range(values.ndim) if i not in separator]
    axes = [*separator, *rest]
    grouped = np.transpose(values, axes).reshape(max(int(targets.size), 1), -1)
    counts = round_within_groups(grouped, targets.reshape(-1))
    return np.transpose(counts.reshape([values.shape[i] for i in axes]), np.argsort(axes))
