"""Publishable tables: cells named in the domain's own values, whole non-negative counts that
agree across tables, and the 95 % margin of every cell.

The census TopDown route: one non-negative estimate of the data vector is fitted to the noisy
measurements (:func:`engine.linalg.nonnegative.nonnegative_least_squares`, with the public
total when there is one), rounded to whole counts that keep the total, and every table is a
sum of that one integer vector -- so a 1-way table equals the sums of every 2-way table that
contains it and every table has the same total. This is post-processing of the released
measurements: it costs no privacy.

The margins come from the plan's per-query variance and hold for the *unbiased* raw estimate
``W A^+ y`` (kept in the ``raw`` column when asked), not for the rounded counts, which trade a
small bias (non-negativity) for consistency.

Example:
    >>> from engine.domain import Domain
    >>> from engine.linalg.matrix import Identity
    >>> from engine.workloads.workload import Workload
    >>> domain = Domain.from_spec({"sex": {"labels": ["female", "male"]}, "smoker": 2})
    >>> workload = Workload.marginals(domain, k=1)
    >>> tables = publishable_tables(workload, strategy=Identity(4),
    ...     measurements=np.array([3.2, -0.4, 5.1, 2.0]), noise_variances=1.0, total=10,
    ...     per_query_variance=np.ones(4))
    >>> tables.frames["sex"]
          sex  estimate  margin_95
    0  female         3       1.96
    1    male         7       1.96
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse.linalg as spla

from engine.analysis.cost_model import FLOAT, format_bytes, memory_limit
from engine.domain import Attribute
from engine.errors import NotApplicable, SpecError
from engine.linalg.matrix import DENSE_GUARD, Matrix
from engine.linalg.nonnegative import (
    NonnegativeFit,
    ShiftedGramSolver,
    nonnegative_fit,
    round_preserving_total,
)
from engine.workflows.marginal_fit import MarginalFit, fit_marginals, fits_marginals
from engine.workflows.model_tables import ModelCounts, model_counts
from engine.workflows.three_way_fit import clear_cache, kronecker_cubes, three_way_applies
from engine.workloads.labels import (
    DESCRIBED_BLOCK_ENTRIES,
    readable_labels,
    row_value,
    run_value,
)
from engine.workloads.term import Term
from engine.workloads.workload import Workload

#: The post-processings :func:`publishable_tables` knows.
POST_PROCESSING = ("consistent", "raw")
#: Where the consistent route fits: ``auto`` (the default: ``three-way`` where it applies
#: with a Kronecker strategy's own 3-way estimate on a domain over :data:`AUTO_MIN_CELLS`
#: cells, else ``cells``), one count per cell of the domain, or (1- and 2-way marginal
#: tables only) the tables themselves (:mod:`engine.workflows.marginal_fit`), or as the
#: margins of agreeing non-negative 3-way tables (:mod:`engine.workflows.three_way_fit`).
FIT_SPACES = ("auto", "cells", "marginals", "three-way")
#: ``auto`` fits cells on domains of at most this many cells: there the cell fit runs to its
#: optimum within the default work limit and costs little (benchmarks/README.md, issue 28).
AUTO_MIN_CELLS = 100_000
#: Half-width of the 95 % interval in standard deviations, per noise family: the normal
#: quantile for Gaussian noise; for Laplace noise the exact 95 % interval of one Laplace
#: variable, ln(20)/sqrt(2) = 2.12 sd (an answer combining several Laplace draws is closer to
#: Gaussian, whose interval is narrower).
MARGIN_Z = {"gaussian": 1.959963984540054, "zcdp": 1.959963984540054,
            "laplace": math.log(20.0) / math.sqrt(2.0)}
#: Default work limit of the non-negative fit, in cell-products (products with the strategy's
#: Gram or its factors, times cells): exact fits up to ~1e5 cells; on 1e6 cells 60 products
#: (30 ADMM iterations on a Kronecker strategy: seconds; published marginals more accurate
#: than the raw estimate on sparse data), after which the best feasible estimate so far is used
#: and the method says so.
WORK_LIMIT = 6e7
#: Full-domain vectors the consistent post-processing holds at its peak (the solver's iterate,
#: gradient, Newton step, conjugate-gradient vectors and temporaries).
VECTOR_COPIES = 24


@dataclass(frozen=True)
class PublishedTables:
    """The tables of one release.

    Attributes:
        frames: one table per workload term, keyed by a readable name (``"age x sex"``):
            a column per attribute holding the domain's values (``total`` where the term sums
            an attribute), or a ``query`` column of readable labels for terms that are not
            products; then ``estimate`` (whole counts; absent for ``raw``), ``margin_95`` and,
            when asked, ``raw``.
        method: in plain words, which post-processing ran and for which estimate the margins
            hold.
    """

    frames: dict[str, pd.DataFrame]
    method: str

    def write(self, directory: str | os.PathLike[str], *, notice: str | None = None
              ) -> list[Path]:
        """Write one CSV per table (and a Parquet file when ``pyarrow`` is installed) into
        ``directory``, atomically: every file is written under a temporary name and renamed
        into place only when all are complete.

        Args:
            directory: created if missing.
            notice: a line each CSV opens with, as a ``#`` comment (e.g.
                :data:`engine.noise.SEEDED_LABEL` for a seeded run).

        Returns:
            The paths written, CSVs first.

        Raises:
            SpecError: naming the directory when it cannot be created or written.
        """
        out = Path(directory)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpecError(f"tables: cannot create {str(out)!r} ({exc.strerror})") from None
        try:
            import pyarrow  # noqa: F401 -- optional: Parquet only when it is installed
        except ImportError:
            formats = ("csv",)
        else:
            formats = ("csv", "parquet")
        stems = file_stems(list(self.frames))
        temps: list[tuple[Path, Path]] = []
        try:
            for suffix in formats:
                for stem, frame in zip(stems, self.frames.values(), strict=True):
                    fd, name = tempfile.mkstemp(prefix=f".{stem}-", suffix=".tmp", dir=out)
                    os.close(fd)
                    temps.append((Path(name), out / f"{stem}.{suffix}"))
                    if suffix == "csv":
                        with open(name, "w", newline="", encoding="utf-8") as fh:
                            if notice:
                                fh.write(f"# {notice}\n")
                            frame.to_csv(fh, index=False)
                    else:
                        frame.to_parquet(name, index=False)
            for tmp, final in temps:
                os.replace(tmp, final)
            written = [final for _, final in temps]
            temps.clear()
        except OSError as exc:
            raise SpecError(f"tables: cannot write into {str(out)!r} "
                            f"({exc.strerror or exc})") from None
        finally:
            for tmp, _ in temps:
                tmp.unlink(missing_ok=True)
        return written


def file_stems(names: list[str]) -> list[str]:
    """A distinct file-name stem per table name: ``age x sex`` -> ``age_x_sex``."""
    stems: list[str] = []
    for name in names:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_.") or "table"
        candidate, n = stem, 1
        while candidate in stems:
            n += 1
            candidate = f"{stem}_{n}"
        stems.append(candidate)
    return stems


def max_cells() -> int:
    """The largest domain (cells) whose data vector the consistent post-processing holds:
    the dense guard, or fewer when ``VECTOR_COPIES`` vectors would exceed the memory limit."""
    return int(min(DENSE_GUARD, memory_limit() / (FLOAT * VECTOR_COPIES)))


def publishable_tables(workload: Workload, *, strategy: Matrix | None,
                       measurements: np.ndarray, noise_variances: float | np.ndarray,
                       total: int | None, per_query_variance: np.ndarray,
                       post_process: str = "consistent", noise: str = "gaussian",
                       raw: np.ndarray | None = None, raw_column: bool = False,
                       work_limit: float | None = WORK_LIMIT,
                       margin_note: str | None = None,
                       fit_space: str = "auto") -> PublishedTables:
    """Labelled tables of a release, one per workload term.

    Args:
        workload: the released workload.
        strategy: the measured matrix A; None when ``measurements`` are the workload's own
            (weighted) answers, e.g. from a mechanism that reconstructs in its own way (then
            they are fitted with ``per_query_variance`` as their variances).
        measurements: the noisy answers y to A (counts).
        noise_variances: the noise variance of every measurement, or one for all (squared
            counts).
        total: the public number of records, which every table then sums to; None when it is
            not public (the tables then share the fitted total, rounded).
        per_query_variance: the variance of every (weighted) workload answer of the raw
            estimate, as ``Plan.variances()`` gives it (squared counts).
        post_process: ``consistent`` (whole non-negative counts that agree across tables) or
            ``raw`` (the unbiased estimates only, fractional and possibly negative).
        noise: the noise family (``gaussian``, ``zcdp`` or ``laplace``), for the margins.
        raw: the unbiased workload answers when the plan reconstructs them its own way
            (``Plan.reconstruct``, recommended: the margins are that estimate's); default
            ``W A^+ y`` (weighted by the noise variances when they differ).
        raw_column: also keep the raw estimate beside the counts.
        work_limit: the non-negative fit's budget in cell-products (None: until it
            converges; 0: the least-squares estimate projected onto non-negative vectors with
            the total, the fastest consistent route). Every budget gives whole,
            non-negative, consistent counts; the method says whether the fit converged.
        fit_space: ``auto`` (``three-way`` for 1- and 2-way marginal tables over at least
            three attributes with a Kronecker strategy's reconstruction on a domain of more
            than :data:`AUTO_MIN_CELLS` cells -- there it is the more accurate and by far
            the faster fit (benchmarks/README.md) -- else ``cells``), ``cells`` (one
            non-negative estimate of the data), ``marginals`` (for
            1- and 2-way marginal tables: the tables themselves are fitted, a few thousand
            unknowns whatever the domain's size; :mod:`engine.workflows.marginal_fit`; other
            workloads fit cells) or ``three-way`` (the same tables as the margins of agreeing
            non-negative 3-way tables, fitted also to a Kronecker strategy's own 3-way
            estimate; :mod:`engine.workflows.three_way_fit`). A domain too large to hold
            one count per cell fits 1- and 2-way marginal tables in their space whatever this
            says, other marginal tables with a graphical model
            (:mod:`engine.workflows.model_tables`, the ``pgm`` extra), and publishes ``raw``
            otherwise, saying why.
        margin_note: how the margins were computed and for which estimate they hold, in
            words (default: from the plan's per-query variance, for the unbiased raw
            estimate).

    Returns:
        The tables and the method in words.

    Raises:
        SpecError: one line naming the field: an unknown post-processing or noise, a length
            that does not match the workload, or a domain too large to hold a data vector.
    """
    check_publishing(post_process, fit_space)
    if noise not in MARGIN_Z:
        raise SpecError(f"noise: unknown {noise!r}; allowed: {', '.join(MARGIN_Z)}")
    queries = workload.num_queries
    variance = np.asarray(per_query_variance, dtype=float).reshape(-1)
    if variance.size != queries:
        raise SpecError(f"per_query_variance: expected {queries:,} values (one per query), "
                        f"got {variance.size:,}")
    y = np.asarray(measurements, dtype=float).reshape(-1)
    fitted = workload.matrix if strategy is None else strategy
    model: ModelCounts | MarginalFit | None = None
    held = None
    # the raw answers when they are at hand without the data vector
    answers = raw if raw is not None else (y if strategy is None else None)
    if answers is not None and np.size(answers) != queries:
        answers = None  # refused below, naming the field
    cubes = None
    attributes = sorted({a for t in workload.terms for a in t.attrs})
    marginal = post_process == "consistent" and answers is not None and fits_marginals(workload)
    if (marginal and raw is not None
            and (fit_space == "three-way"
                 or (fit_space == "auto" and workload.domain.size > AUTO_MIN_CELLS))
            and three_way_applies(workload.domain.shape, attributes)):
        cubes = kronecker_cubes(strategy, y, noise_variances, attributes)
    if fit_space == "auto":
        fit_space = "three-way" if cubes is not None else "cells"
    # the memory limit is read only where it decides the route
    if marginal and (fit_space != "cells" or workload.domain.size > max_cells()):
        model = fit_marginals(workload, np.asarray(answers, float).reshape(-1), variance,
                              total=total, three_way=fit_space == "three-way", cubes=cubes)
    elif (post_process == "consistent" and answers is not None
          and workload.domain.size > max_cells()):
        # too large for one count per cell: consistent counts from a graphical model fitted
        # to the raw answers, else the raw answers only, saying why
        try:
            model = model_counts(workload, answers, variance, total=total,
                                 max_cells=max_cells())
        except NotApplicable as exc:
            post_process, held = "raw", str(exc)
    needs_vector = ((post_process == "consistent" and model is None)
                    or (raw is None and strategy is not None))
    if needs_vector:
        check_domain(workload)
    raw_given = raw is not None
    data_estimate = None  # the least-squares data vector, when computed for the raw answers
    if raw is None and strategy is not None:
        data_estimate = least_squares(strategy, y, noise_variances)
        raw = workload.answer(data_estimate)
    elif raw is None:
        raw = y
    raw = np.asarray(raw, dtype=float).reshape(-1)
    if raw.size != queries:
        raise SpecError(f"raw: expected {queries:,} answers, got {raw.size:,}")
    counts, fit, estimated_total = None, None, None
    if model is not None:
        counts = _Marginals(workload.domain.shape, known=model.tables)
    elif post_process == "consistent":
        variances = variance if strategy is None else noise_variances
        products = None if work_limit is None else int(work_limit // workload.domain.size)
        solver = _marginal_solver(workload, variance) if strategy is None else None
        start = (data_estimate if data_estimate is not None
                 else _least_squares_start(fitted, y, variances, solver))
        if total is None:
            # Not public: the TopDown route's top level, the least-squares estimate of the
            # total (a well-measured direction), then every count fits it. Over the orthant
            # alone a fit stopped at the work limit keeps far from the optimum's total (Adult,
            # 856,800 cells: 26,105 records after 60 products, 48,952 at the optimum).
            estimated_total = max(0, round(float(start.sum())))
        fit_total = total if total is not None else estimated_total
        fit = nonnegative_fit(fitted, y, variances, total=fit_total, start=start,
                              max_products=products, gram_solver=solver)
        whole = round_preserving_total(fit.x, int(fit_total))
        counts = _Marginals(workload.domain.shape, vector=whole)
    frames = _frames(workload, counts, raw, MARGIN_Z[noise] * np.sqrt(variance),
                     raw_column or counts is None)
    estimator = ("the released answers" if strategy is None
                 else "the plan's reconstruction" if raw_given else "W A^+ y")
    method = _method(post_process, noise, total, estimator, fit, margin_note, model,
                     estimated_total)
    if held is not None:
        method += (f" The domain has {workload.domain.size:.3g} cells, more than the "
                   f"{max_cells():,} whose one count per cell fits in memory: raw only; "
                   f"{held}.")
    return PublishedTables(frames, method)


def forget_workloads() -> None:
    """Empty the caches that depend on the workload alone (the tables' value labels, the
    3-way fit's index and factor pseudo-inverses): to time a first release; a release never
    needs it."""
    _value_columns.cache_clear()
    _own_spread.cache_clear()
    _own_values.cache_clear()
    clear_cache()


def check_publishing(post_process: str, fit_space: str) -> None:
    """A one-line SpecError naming the field for a post-processing not in
    :data:`POST_PROCESSING` or a fit space not in :data:`FIT_SPACES`."""
    if post_process not in POST_PROCESSING:
        raise SpecError(f"post_process: unknown {post_process!r}; allowed: "
                        f"{', '.join(POST_PROCESSING)}")
    if fit_space not in FIT_SPACES:
        raise SpecError(f"fit_space: unknown {fit_space!r}; allowed: {', '.join(FIT_SPACES)}")


def check_domain(workload: Workload) -> None:
    """A one-line SpecError when the domain is too large to hold a data vector."""
    cells, limit = workload.domain.size, max_cells()
    if cells > limit:
        raise SpecError(f"tables: the domain has {cells:.3g} cells; consistent counts hold one "
                        f"estimate per cell, at most {limit:,} cells (memory limit "
                        f"{format_bytes(memory_limit())}); publish post_process='raw' or "
                        f"coarsen the domain")


def least_squares(strategy: Matrix, y: np.ndarray,
                  noise_variances: float | np.ndarray = 1.0) -> np.ndarray:
    """The (variance-weighted) least-squares data vector: ``A^+ y`` by the strategy's
    structured pseudo-inverse when the noise is uniform, else LSQR on products with the rows
    scaled by their noise's standard deviation."""
    v = np.asarray(noise_variances, dtype=float).reshape(-1)
    if v.size <= 1 or np.all(v == v[0]):
        try:
            return np.asarray(strategy.pinv().matvec(y), dtype=float)
        except (ValueError, NotImplementedError):
            pass
    scale = 1.0 / np.sqrt(np.broadcast_to(v, (strategy.shape[0],)))
    operator = spla.LinearOperator(
        strategy.shape, dtype=float, matvec=lambda p: scale * strategy.matvec(p),
        rmatvec=lambda q: strategy.rmatvec(scale * q))
    return spla.lsqr(operator, scale * y, atol=1e-12, btol=1e-12, iter_lim=10_000)[0]


def _least_squares_start(fitted: Matrix, y: np.ndarray, variances: float | np.ndarray,
                         solver: ShiftedGramSolver | None) -> np.ndarray:
    """The variance-weighted least-squares data vector the cell fit starts from (by the
    marginal solver when there is one, else :func:`least_squares`)."""
    if solver is None:
        return least_squares(fitted, y, variances)
    weights = 1.0 / np.broadcast_to(np.asarray(variances, dtype=float).reshape(-1), y.shape)
    return np.asarray(solver.least_squares(fitted.rmatvec(weights * y)), dtype=float)


def _marginal_solver(workload: Workload, variance: np.ndarray) -> ShiftedGramSolver | None:
    """The exact shifted Gram solver of released marginal answers weighted by their inverse
    variances (:meth:`ShiftedGramSolver.of_marginals`), when every term is a plain marginal
    whose answers share one variance; None otherwise."""
    weights: dict[tuple[int, ...], float] = {}
    start = 0
    for term in workload.terms:
        stop = start + term.num_queries
        v = variance[start:stop]
        if not (term.is_product and all(f.is_identity() for f in term.factors or ())
                and np.all(v == v[0]) and v[0] > 0):
            return None
        weights[term.attrs] = weights.get(term.attrs, 0.0) + term.weight ** 2 / float(v[0])
        start = stop
    return ShiftedGramSolver.of_marginals(workload.domain.shape, weights)


#: Decimals of a published margin (people).
MARGIN_DECIMALS = 2


def _frames(workload: Workload, marginals: _Marginals | None, raw: np.ndarray,
            margins: np.ndarray, keep_raw: bool) -> dict[str, pd.DataFrame]:
    frames: dict[str, pd.DataFrame] = {}
    labels: list[str] | None = None
    start = 0
    for term in workload.terms:
        stop = start + term.num_queries
        # tables show plain counts: the term's weight only ranks its queries in the planning
        weight = term.weight if term.weight else 1.0
        if term.is_product:
            columns: dict[str, object] = dict(_value_columns(term))
        else:
            if labels is None:
                labels = readable_labels(workload)
            columns = {"query": labels[start:stop]}
        if marginals is not None:
            columns["estimate"] = _estimate(term, marginals.over(term.attrs))
        # published to the hundredth of a person: more digits state a precision it lacks
        margin = margins[start:stop] if weight == 1.0 else margins[start:stop] / abs(weight)
        columns["margin_95"] = np.round(margin, MARGIN_DECIMALS)
        if keep_raw:
            columns["raw"] = raw[start:stop] / weight
        # the label columns are shared, read-only string arrays: copy-on-write keeps them;
        # the row index given (the default one), so pandas need not infer it from the columns
        frames[_distinct_name(_table_name(term), frames)] = pd.DataFrame(
            columns, index=pd.RangeIndex(stop - start), copy=False)
        start = stop
    return frames


#: A count vector with at most this share of its cells occupied has its marginals summed from
#: the occupied cells alone (one pass over them per table instead of passes over the domain).
SPARSE_SHARE = 1 / 16


class _Marginals:
    """Integer marginals of one count vector, or of whole-count tables that agree on every
    attribute they share (a graphical model's rounded cliques; attributes in domain order),
    each summed from the occupied cells when they are few, else from the smallest marginal
    known that contains it (exact: int64 sums, or bincounts of whole counts below 2**53)."""

    def __init__(self, shape: tuple[int, ...], *, vector: np.ndarray | None = None,
                 known: dict[tuple[int, ...], np.ndarray] | None = None) -> None:
        self.shape = shape
        self.known: dict[tuple[int, ...], np.ndarray] = dict(known or {})
        self.occupied = None
        if vector is not None:
            self.known[tuple(range(len(shape)))] = vector.reshape(shape)
            occupied = np.flatnonzero(vector)
            if occupied.size <= SPARSE_SHARE * vector.size:
                self.occupied = (np.unravel_index(occupied, shape), vector[occupied])

    def over(self, attrs: tuple[int, ...]) -> np.ndarray:
        if attrs not in self.known and self.occupied is not None:
            coordinates, values = self.occupied
            sizes = tuple(self.shape[a] for a in attrs)
            index = (np.ravel_multi_index([coordinates[a] for a in attrs], sizes) if attrs
                     else np.zeros(values.size, dtype=np.intp))
            sums = np.bincount(index, weights=values, minlength=math.prod(sizes))
            self.known[attrs] = sums.astype(np.int64).reshape(sizes)
        if attrs not in self.known:
            source = min((s for s in self.known if set(attrs) <= set(s)),
                         key=lambda s: self.known[s].size)
            extra = [a for a in source if a not in attrs]
            if len(extra) > 1:
                # through the marginal without the largest extra attribute: the next table
                # that shares the rest sums a smaller array
                largest = max(extra, key=lambda a: self.shape[a])
                self.over(tuple(a for a in source if a != largest))
                return self.over(attrs)
            drop = tuple(i for i, a in enumerate(source) if a not in attrs)
            self.known[attrs] = self.known[source].sum(axis=drop)
        return self.known[attrs]


def _estimate(term: Term, marginal: np.ndarray) -> np.ndarray:
    """The term's queries on the integer marginal over its attributes."""
    if term.is_product and all(f.is_identity() for f in term.factors or ()):
        return marginal.reshape(-1)
    return _whole(term.query.matvec(marginal.reshape(-1).astype(float)))


def _whole(values: np.ndarray) -> np.ndarray:
    """Sums of whole counts as int64 (exact below 2**53); weighted queries stay real."""
    rounded = np.rint(values)
    return rounded.astype(np.int64) if np.array_equal(rounded, values) else values


@lru_cache(maxsize=256)
def _value_columns(term: Term) -> tuple[tuple[str, pd.api.extensions.ExtensionArray], ...]:
    """One column per attribute of a product term, rows in the term's (C) order, as the
    arrays a frame stores (cached per term: a repeated release of a workload labels its
    tables again): each attribute's values as a string array (:func:`_attribute_values`),
    repeated by position (no string inferred per table)."""
    domain = term.domain
    factors = term.factors or ()
    values = [_attribute_values(domain.attributes[a], f)
              for a, f in zip(term.attrs, factors, strict=True)]
    if not values:  # the grand total
        return (("total", _string_array(["total"])),)
    if len(values) == 1:  # the attribute's own array (frames share it, copy-on-write)
        return ((domain.attributes[term.attrs[0]].name, values[0]),)
    sizes = [len(v) for v in values]
    columns = []
    for i, (a, factor, value) in enumerate(zip(term.attrs, factors, values, strict=True)):
        attribute = domain.attributes[a]
        before, after = math.prod(sizes[:i]), math.prod(sizes[i + 1:])
        if factor.is_identity() and factor.shape[1] == attribute.size:
            column = _own_spread(attribute, before, after)
        else:
            column = value.take(np.tile(np.repeat(np.arange(sizes[i]), after), before))
        columns.append((attribute.name, column))
    return tuple(columns)


@lru_cache(maxsize=1024)
def _own_spread(attribute: Attribute, before: int, after: int
                ) -> pd.api.extensions.ExtensionArray:
    """``attribute``'s own values (:func:`_own_values`), each repeated ``after`` times, the
    whole tiled ``before`` times: its column in a table over it and other attributes (cached:
    every table with the same sizes around it shares the array, copy-on-write)."""
    return _own_values(attribute).take(
        np.tile(np.repeat(np.arange(attribute.size), after), before))


def _attribute_values(attribute: Attribute, factor: Matrix
                      ) -> pd.api.extensions.ExtensionArray:
    """The rows of ``factor`` over ``attribute`` as table cells, a string array (an
    identity factor's, the attribute's own values, cached per attribute)."""
    if factor.is_identity() and factor.shape[1] == attribute.size:
        return _own_values(attribute)
    return _string_array(_factor_values(attribute, factor))


@lru_cache(maxsize=256)
def _own_values(attribute: Attribute) -> pd.api.extensions.ExtensionArray:
    """Every value of ``attribute`` as a table cell (:func:`run_value`), a string array."""
    return _string_array([run_value(attribute, v, v) for v in range(attribute.size)])


def _string_array(values: list[str]) -> pd.api.extensions.ExtensionArray:
    """``values`` as the array a frame stores for them (the string dtype pandas infers)."""
    return pd.Series(np.asarray(values, dtype=object)).array


def _factor_values(attribute: Attribute, factor: Matrix) -> list[str]:
    rows, cols = factor.shape
    if factor.is_identity():
        return [run_value(attribute, v, v) for v in range(cols)]
    if factor.is_total():
        return ["total"]
    name = str(getattr(factor, "name", "") or "block")
    if rows * cols > DESCRIBED_BLOCK_ENTRIES:
        return [f"query {i} of {name}" for i in range(rows)]
    dense = np.asarray(factor.dense(), dtype=float)
    return [row_value(attribute, dense[i], i, name) for i in range(rows)]


def _table_name(term: Term) -> str:
    names = [term.domain.attributes[a].name for a in term.attrs]
    marginal = term.is_product and all(f.is_identity() for f in term.factors or ())
    if marginal:
        return " x ".join(names) or "total"
    return term.label or " x ".join(names) or "total"


def _distinct_name(name: str, known: dict[str, pd.DataFrame]) -> str:
    candidate, n = name, 1
    while candidate in known:
        n += 1
        candidate = f"{name} ({n})"
    return candidate


def _method(post_process: str, noise: str, total: int | None, estimator: str,
            fit: NonnegativeFit | None, margin_note: str | None,
            model: ModelCounts | MarginalFit | None = None,
            estimated_total: int | None = None) -> str:
    z = MARGIN_Z[noise]
    if margin_note is not None:
        margin = margin_note
    elif noise == "laplace":
        margin = (f"margin_95: half-width of the 95 % interval, {z:.2f} standard deviations "
                  "(the exact interval of one Laplace variable; wider than needed for answers "
                  "combining several draws)")
    else:
        margin = (f"margin_95: half-width of the 95 % interval, {z:.2f} standard deviations "
                  "of the Gaussian noise")
    if margin_note is None:
        margin += (", from the plan's per-query variance; it holds for the unbiased raw "
                   f"estimate ({estimator}), not for the rounded counts")
    if post_process == "raw":
        return ("raw: the unbiased least-squares estimates, unrounded (fractional, possibly "
                f"negative; tables may disagree). {margin}.")
    kept = (f"summing exactly to the public total {int(total):,}" if total is not None
            else f"summing to {estimated_total:,}, the least-squares estimate of the total "
            "(not public), rounded" if estimated_total is not None
            else "summing to its own fitted total")
    if model is not None:
        fitted = ("the released workload answers" if estimator == "the released answers"
                  else f"the raw estimates ({estimator})")
        return (f"consistent: {model.describe(fitted, kept)}. Post-processing only: it costs "
                f"no privacy. {margin}.")
    fitted = ("the released workload answers" if estimator == "the released answers"
              else "the noisy measurements")
    if fit is not None and fit.converged:
        solved = "(converged to the optimum)"
    elif fit is not None and fit.products == 0:
        solved = ("(at the work limit: the least-squares estimate projected onto non-negative "
                  "counts with that total, not refined)")
    else:
        stationarity = fit.stationarity if fit is not None else math.nan
        solved = (f"(stopped at the work limit after {fit.products if fit else 0} Gram "
                  f"products, relative projected gradient {stationarity:.1e}: close to, not "
                  "at, the optimum)")
    return ("consistent: one non-negative estimate of the data (one count per cell) fitted to "
            f"{fitted} by variance-weighted least squares {solved}, {kept}, then rounded to "
            "whole "
            "counts by largest remainders (each within 1, total kept); every table sums that "
            "one estimate, so tables agree and share one total. Post-processing only: it "
            f"costs no privacy. {margin}.")
