"""The covariance of a Kronecker strategy's raw marginal tables, from its per-attribute Grams.

A strategy ``A = A_1 kron ... kron A_d`` measured with Gaussian noise of one variance
``s2`` gives the least-squares estimate ``x^ = A^+ y`` of covariance ``s2 (A'A)^+ = s2 kron_i
G_i^+`` (``G_i = A_i' A_i``). The marginal table over the attribute set ``T`` is ``M_T x^``
with ``M_T = kron_i (I if i in T else 1')``, so between the tables ``T`` and ``S``::

    Sigma_TS = s2 kron_i K_i,  K_i = G_i^+ (i in T and S), G_i^+ 1 (T only),
                                     1' G_i^+ (S only), 1' G_i^+ 1 (neither)

-- a Kronecker product of tiny per-attribute matrices, never one of the domain's size.

Per attribute, the basis ``[1'; Q_i]`` (the sum, then ``n_i - 1`` contrasts with
``Q_i G_i^+ 1 = 0`` and ``Q_i G_i^+ Q_i' = I``) turns every table into *components*: the
component ``U`` (a set of attributes) is a table's coordinates that are contrasts on ``U`` and
sums elsewhere, the same numbers in every table holding ``U``. Components are uncorrelated,
each of variance ``s2 prod_{i not in U} 1' G_i^+ 1``: the generalised-least-squares weights of
the raw tables are diagonal there (:meth:`MarginalCovariance.component_variance`).

Post-processing arithmetic on public quantities: no privacy cost.

Example:
    >>> cov = MarginalCovariance([np.eye(2), np.eye(3)], noise_variance=1.0)
    >>> cov.block((0,), ()).tolist()  # a 1-way table's cells against the total
    [[3.0], [3.0]]
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from engine.linalg.matrix import Kron, Matrix

#: Largest attribute (values) whose Gram the covariance holds densely.
MAX_FACTOR = 4096


class MarginalCovariance:
    """The raw marginals' covariance of one Kronecker strategy (module docstring).

    Attributes:
        shape: the domain's attribute sizes.
        noise_variance: the noise variance of every measurement (squared counts).
    """

    def __init__(self, grams: Sequence[np.ndarray], noise_variance: float) -> None:
        """
        Args:
            grams: ``G_i = A_i' A_i`` per attribute, in domain order (full rank).
            noise_variance: one noise variance for every measurement (squared counts).

        Raises:
            ValueError: a Gram that is not square and of full rank.
        """
        self.shape = tuple(len(g) for g in grams)
        self.noise_variance = float(noise_variance)
        self._extended: list[np.ndarray] = []
        self._sums = np.empty(len(grams))
        self._contrasts: list[np.ndarray] = []
        self._inverse_bases: list[np.ndarray] = []
        for i, gram in enumerate(grams):
            g = np.asarray(gram, dtype=float)
            n = g.shape[0]
            if g.shape != (n, n) or np.linalg.matrix_rank(g) < n:
                raise ValueError(f"grams: attribute {i}'s Gram is not square and of full rank")
            c = np.linalg.inv(g)
            c = (c + c.T) / 2
            v = c.sum(axis=1)
            extended = np.empty((n + 1, n + 1))
            extended[:n, :n], extended[:n, n], extended[n, :n] = c, v, v
            extended[n, n] = v.sum()
            self._extended.append(extended)
            self._sums[i] = v.sum()
            # an orthonormal basis of the complement of G^+ 1, whitened in G^+
            basis = np.linalg.qr(np.column_stack([v, np.eye(n)[:, :n - 1]]))[0][:, 1:]
            values, vectors = np.linalg.eigh(basis.T @ c @ basis)
            contrasts = (vectors / np.sqrt(values)) @ vectors.T @ basis.T
            self._contrasts.append(contrasts)
            self._inverse_bases.append(np.linalg.inv(np.vstack([np.ones(n), contrasts])))

    @classmethod
    def of_strategy(cls, strategy: Matrix | None, noise_variances: float | np.ndarray
                    ) -> MarginalCovariance | None:
        """The covariance of ``strategy``'s raw marginals, or None where it does not apply:
        not a Kronecker product of small full-rank factors, or noise of differing
        variances."""
        v = np.asarray(noise_variances, dtype=float).reshape(-1)
        if (not isinstance(strategy, Kron) or v.size == 0 or not np.all(v == v[0])
                or not (np.isfinite(v[0]) and v[0] > 0)
                or any(f.shape[1] > MAX_FACTOR for f in strategy.factors)):
            return None
        grams = []
        for factor in strategy.factors:
            a = np.asarray(factor.dense(), dtype=float)
            grams.append(a.T @ a)
        try:
            return cls(grams, float(v[0]))
        except ValueError:
            return None

    def component_variance(self, component: tuple[int, ...]) -> float:
        """The variance of each coordinate of the component over ``component`` (attribute
        indices): ``s2 prod_{i not in component} 1' G_i^+ 1`` (squared counts)."""
        others = [i for i in range(len(self.shape)) if i not in component]
        return self.noise_variance * float(np.prod(self._sums[others]))

    def block(self, rows: tuple[int, ...], columns: tuple[int, ...]) -> np.ndarray:
        """``Sigma_TS`` between the tables over ``rows`` and ``columns`` (sorted attribute
        indices), cells in C order (squared counts)."""
        out = np.full((1, 1), self.noise_variance)
        for i, n in enumerate(self.shape):
            r = np.arange(n) if i in rows else np.array([n])
            c = np.arange(n) if i in columns else np.array([n])
            out = np.kron(out, self._extended[i][np.ix_(r, c)])
        return out

    def cell_coordinates(self, attrs: tuple[int, ...], cells: np.ndarray) -> np.ndarray:
        """Per-attribute coordinates of cells (flat C-order indices) of the table over
        ``attrs``: one row per cell, one column per attribute, ``n_i`` where it is summed."""
        out = np.tile(np.asarray(self.shape, dtype=np.intp), (np.size(cells), 1))
        if attrs:
            coords = np.unravel_index(np.asarray(cells, dtype=np.intp),
                                      [self.shape[a] for a in attrs])
            for a, coord in zip(attrs, coords, strict=True):
                out[:, a] = coord
        return out

    def entries(self, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """The covariance between cells given by :meth:`cell_coordinates` (squared
        counts)."""
        out = np.full((rows.shape[0], columns.shape[0]), self.noise_variance)
        for i, extended in enumerate(self._extended):
            out *= extended[np.ix_(rows[:, i], columns[:, i])]
        return out

    def components(self, attrs: tuple[int, ...], table: np.ndarray
                   ) -> dict[tuple[int, ...], np.ndarray]:
        """The table over ``attrs`` (sorted) in the component basis: every subset ``U`` of
        ``attrs`` -> its coordinates (contrasts on ``U``, C order), uncorrelated across
        ``U`` with variance :meth:`component_variance`."""
        t = self._along(attrs, np.asarray(table, dtype=float),
                        [np.vstack([np.ones(self.shape[a]), self._contrasts[a]])
                         for a in attrs])
        return {u: t[_slices(attrs, u)].reshape(-1) for u in _subsets(attrs)}

    def matvec(self, tables: dict[tuple[int, ...], np.ndarray],
               onto: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], np.ndarray]:
        """``Sigma v``: ``v`` given table by table (sorted attribute sets -> arrays of the
        tables' shapes), the product returned on the tables ``onto``; through the component
        basis, a few small products per table whatever the domain's size."""
        # B' v: every table's share of each component's coordinates
        share: dict[tuple[int, ...], np.ndarray] = {}
        for attrs, v in tables.items():
            g = self._along(attrs, np.asarray(v, dtype=float),
                            [self._inverse_bases[a].T for a in attrs])
            for u in _subsets(attrs):
                part = g[_slices(attrs, u)]
                share[u] = share[u] + part if u in share else part.copy()
        for u in share:
            share[u] *= self.component_variance(u)
        out = {}
        for attrs in onto:
            t = np.zeros([self.shape[a] for a in attrs])
            for u in _subsets(attrs):
                if u in share:
                    t[_slices(attrs, u)] = share[u]
            out[attrs] = self._along(attrs, t, [self._inverse_bases[a] for a in attrs])
        return out

    def _along(self, attrs: tuple[int, ...], table: np.ndarray,
               matrices: list[np.ndarray]) -> np.ndarray:
        """``table`` (over ``attrs``) with ``matrices[k]`` applied along its axis ``k``."""
        t = table.reshape([self.shape[a] for a in attrs])
        for axis, m in enumerate(matrices):
            t = np.moveaxis(np.tensordot(m, t, axes=(1, axis)), 0, axis)
        return t


def _subsets(attrs: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [u for k in range(len(attrs) + 1) for u in itertools.combinations(attrs, k)]


def _slices(attrs: tuple[int, ...], component: tuple[int, ...]) -> tuple[slice | int, ...]:
    """The coordinates of ``component`` within a table over ``attrs`` in the component basis:
    the sum (index 0) on attributes outside it, the contrasts (1:) on those in it."""
    return tuple(slice(1, None) if a in component else 0 for a in attrs)

