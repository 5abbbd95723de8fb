"""Consistent whole counts from a graphical model, for domains too large to hold one count per
cell: the `mbi` route of :func:`engine.workflows.tables.publishable_tables`.

The released marginal tables (their raw unbiased answers, each cell weighted by the inverse of
its noise variance) are fitted by a Markov random field whose cliques are the tables' attribute
sets (Private-PGM: McKenna, Sheldon & Miklau 2019, the ``mbi`` package, mirror descent). The
model holds one table per clique of its junction tree, never the domain. Its clique marginals
are rounded to whole counts along the junction tree: the first clique by largest remainders to
the total, every next clique within each value of the separator it shares with the clique
before it, to that separator's whole counts. Neighbouring cliques then agree exactly on their
separators, so (running intersection) any two tables summed from the rounded cliques agree on
every attribute they share, and all share one total. (Workloads of 1- and 2-way tables need
no model: :mod:`engine.workflows.marginal_fit` fits the tables themselves, whose junction
tree is often the whole domain.)

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
from engine.workflows.table_rounding import round_within_groups
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
    """

    tables: dict[tuple[int, ...], np.ndarray]
    total: int
    cells: int
    iterations: int

    def describe(self, fitted: str, kept: str) -> str:
        """The route in words, for a release's method (``fitted``: what the model was fitted
        to; ``kept``: which total the tables keep)."""
        return (f"a graphical model (Private-PGM, the mbi package: {self.iterations} "
                f"mirror-descent iterations) fitted to {fitted}, each cell weighted by the "
                f"inverse of its noise variance, {kept} ({self.total:,}); the model holds "
                f"{self.cells:,} cells, not the domain's. Its clique marginals are rounded to "
                "whole counts along its junction tree (the first by largest remainders to the "
                "total, each next one within every value of the attributes it shares with the "
                "one before, to that value's whole count), so tables agree on every attribute "
                "they share and share one total; every table sums one rounded clique")


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
            tree would hold more than ``max_cells`` cells (one line saying which).
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
    tree, _ = mbi.junction_tree.make_junction_tree(domain, list(dict.fromkeys(cliques)))
    cells = sum(domain.size(c) for c in tree.nodes)
    if cells > max_cells:
        raise NotApplicable(f"a graphical model of these tables would hold {cells:,} cells, "
                            f"more than the {max_cells:,} that fit in memory")
    answers = np.asarray(answers, float).reshape(-1)
    variances = np.asarray(variances, float).reshape(-1)
    measurements = _measurements(mbi, workload, answers, variances)
    whole = int(total) if total is not None else _total(workload, answers, variances)
    model = mbi.estimation.MirrorDescent().estimate(domain, measurements,
                                                    known_total=float(max(whole, 1)),
                                                    iters=iterations)
    tables = _rounded_cliques(tree, lambda c: _marginal(model, c), whole)
    return ModelCounts({tuple(index[a] for a in c): t for c, t in tables.items()}, whole,
                       int(cells), int(iterations))


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


def _import_mbi() -> Any:
    import jax

    # counts need float64 (mbi warns, and stalls, in JAX's default float32)
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        import mbi
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
