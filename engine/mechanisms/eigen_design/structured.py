"""Eigen-Design on Kronecker-product and marginal workloads without a dense n x n matrix.

For a workload that is a weighted union of Kronecker products,
``G = sum_t w_t**2 (V_1^t kron ... kron V_d^t)`` with per-attribute Grams ``V_i^t`` (the
all-ones matrix for an attribute a term sums out). When, on every attribute, the Grams of all
terms commute (identity/total on marginals, any single block, ...), one orthonormal basis
``Q_i`` per attribute diagonalises them all, and the eigen-queries of G are exactly the rows of
``Q = Q_1 kron ... kron Q_d`` with eigenvalues ``c = sum_t w_t**2 kron_i diag(Q_i V_i^t Q_i^T)``.
Program 1's constraint matrix is then ``B = (Q_1 o Q_1) kron ... kron (Q_d o Q_d)`` too, so
the dual solver needs only O(n sum n_i) products and the strategy ``diag(sqrt u) Q`` is applied
with Kronecker mat-vecs: nothing of size n**2 is formed.

When the Grams on an attribute do not commute (e.g. 2-way *range* marginals: the all-range
Gram and the all-ones matrix), no Kronecker basis holds the exact eigenvectors; we then use the
eigenvectors of the attribute's partial trace ``sum_t w_t**2 prod_{k != i} tr(V_k^t) V_i^t``
(the best single-attribute summary of G) as design set. The error stays exact because Program 1
is exact for any orthonormal design (``c_i = (Q G Q^T)_ii``); only optimality within the
eigen-design family is lost, and the plan's ``basis`` fact says so.

Twin values (``engine.linalg.twins``: values that every Gram of an attribute treats alike,
such as SF1's states, sexes, ages inside one bin or race codes with the same number of races)
shrink Program 1 without loss under L2: each class's zero-sum design queries share one weight
and each class is one constraint column (``_twin_grouping``); SF1 drops from 29,440 to 2,600
variables (400 columns), SF1+ from 1.5 million to 5,200.

Where it stops, and why:
* every vector has n entries (weights, costs, the dual variables, the data vector itself), so
  the structured path is limited by memory for vectors, not matrices: ``max_cells`` (default
  2**24 = 16.8M cells; each Program 1 iteration costs O(n sum n_i));
* each attribute's Gram is eigendecomposed densely (attribute sizes up to a few thousand);
* the diagonal completion is not applied: ``tr[G (Q^T U Q + D^2)^-1]`` has no Kronecker form,
  so the plan stores the exact, uncompleted ``diag(sqrt u) Q`` (error = Program 1's value).
  On marginal workloads this is already optimal (it meets the SVD bound exactly);
* terms that are not Kronecker products (pair queries, explicit rows over several attributes)
  have no per-attribute Gram: such workloads need the dense path (n <= max_dense_cells).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from engine.errors import NotApplicable
from engine.linalg.matrix import Dense, Kron, Matrix, kmatvec
from engine.linalg.twins import contrasts, twin_classes
from engine.mechanisms.eigen_design.design import (
    ZERO_TOL,
    WeightedDesign,
    program1_power,
    weighted_design,
)
from engine.mechanisms.eigen_design.designsets import basis
from engine.mechanisms.eigen_design.program1 import GAP_TOL, Program1Result, solve_program1
from engine.progress import Progress
from engine.workloads.blocks import Block
from engine.workloads.workload import Workload

#: Largest domain served by the structured path (vectors of n floats, ~130 MB each at 2**24).
MAX_CELLS = 2**24
#: Off-diagonal mass (relative) below which a basis counts as diagonalising a Gram.
DIAGONAL_RTOL = 1e-9


def _gram(f: Matrix) -> np.ndarray:
    return f.gram_array() if isinstance(f, Block) else f.gram().dense()


def factor_grams(workload: Workload) -> list[tuple[float, list[np.ndarray]]]:
    """``(weight, per-attribute Grams over the full domain)`` for every product term."""
    if not workload.is_product_union:
        bad = next(t.label for t in workload.terms if not t.is_product)
        raise NotApplicable(f"eigen-design (structured): term {bad!r} is not a Kronecker "
                            "product of per-attribute queries")
    return [(t.weight, [_gram(f) for f in t.full_factors()]) for t in workload.terms]


def _offdiagonal(Q: np.ndarray, V: np.ndarray) -> float:
    T = Q @ V @ Q.T
    off = T - np.diag(np.diag(T))
    return float(np.linalg.norm(off) / max(float(np.linalg.norm(T)), 1e-300))


@dataclass(frozen=True)
class AttributeBases:
    """Per-attribute orthonormal bases and whether their product holds G's eigenvectors."""

    bases: list[np.ndarray]
    exact: list[bool]

    @property
    def all_exact(self) -> bool:
        """True when ``Q_1 kron ... kron Q_d`` are exactly the eigen-queries of G."""
        return all(self.exact)


def _is_all_ones(V: np.ndarray) -> bool:
    return bool(np.allclose(V, V.flat[0])) and V.flat[0] > 0


def eigen_bases(grams: list[tuple[float, list[np.ndarray]]], seed: int = 0) -> AttributeBases:
    """Per-attribute bases that diagonalise the attribute's Grams when they commute.

    For each attribute: the eigenvectors of the partial trace, or of a random positive
    combination of the distinct Grams (which separates degenerate eigenspaces of a commuting
    family), when one of them diagonalises every Gram (exact). Otherwise an approximate
    basis: if a term sums the attribute out (all-ones Gram), the constant vector plus the
    eigenvectors of the other Grams' partial trace compressed to its complement, which keeps
    the workload's marginal (low-rank) structure exact; else the partial trace's eigenvectors.
    """
    d = len(grams[0][1])
    rng = np.random.default_rng(seed)
    bases, exact = [], []
    for i in range(d):
        weights = [w**2 * math.prod(float(np.trace(vs[k])) for k in range(d) if k != i)
                   for w, vs in grams]
        partial = sum(c * vs[i] for c, (_, vs) in zip(weights, grams, strict=True))
        distinct: list[np.ndarray] = []
        for _, vs in grams:
            if not any(V.shape == vs[i].shape and np.array_equal(V, vs[i]) for V in distinct):
                distinct.append(vs[i])
        candidates = [partial]
        if len(distinct) > 1:
            scale = [1.0 / max(float(np.abs(V).max()), 1e-300) for V in distinct]
            candidates.append(sum(rng.uniform(0.5, 1.5) * s * V
                                  for s, V in zip(scale, distinct, strict=True)))
        chosen = None
        for M in candidates:
            Q = _descending_eigenvectors(M)
            if all(_offdiagonal(Q, V) <= DIAGONAL_RTOL for V in distinct):
                chosen = Q
                break
        if chosen is not None:
            bases.append(chosen)
            exact.append(True)
            continue
        m = partial.shape[0]
        if any(_is_all_ones(V) for V in distinct):
            others = sum(c * vs[i] for c, (_, vs) in zip(weights, grams, strict=True)
                         if not _is_all_ones(vs[i]))
            P = np.eye(m) - 1.0 / m
            rest = _descending_eigenvectors(P @ others @ P)[: m - 1]
            # the complement eigenvectors are orthogonal to the constant up to round-off
            rest -= rest.mean(axis=1, keepdims=True)
            rest, _ = np.linalg.qr(rest.T)
            bases.append(np.vstack([np.full(m, 1.0 / np.sqrt(m)), rest.T]))
        else:
            bases.append(_descending_eigenvectors(partial))
        exact.append(False)
    return AttributeBases(bases, exact)


def _descending_eigenvectors(M: np.ndarray) -> np.ndarray:
    _, U = np.linalg.eigh((M + M.T) / 2.0)
    return np.ascontiguousarray(U[:, ::-1].T)


def kron_costs(grams: list[tuple[float, list[np.ndarray]]], bases: list[np.ndarray]
               ) -> np.ndarray:
    """``c = diag(Q G Q^T)`` for ``Q = kron(bases)``.

    Term by term: ``sum_t w_t**2 kron_i diag(Q_i V_i^t Q_i^T)`` (a vector of n entries).
    """
    c = None
    for w, vs in grams:
        vec = np.array([w**2])
        for Q, V in zip(bases, vs, strict=True):
            vec = np.kron(vec, np.einsum("ij,jk,ik->i", Q, V, Q))
        c = vec if c is None else c + vec
    return np.maximum(c, 0.0)


def kron_design(workload: Workload, norm: int = 2, *, design_set: str = "eigen",
                max_cells: int = MAX_CELLS, method: str = "auto", tol: float = GAP_TOL,
                max_iter: int = 5000, seed: int = 0,
                progress: Progress | None = None) -> WeightedDesign:
    """Program 1 on a Kronecker design set for a product-union workload (no completion).

    Args:
        workload: a union of Kronecker products.
        norm: 2 (Gram weights, (eps, delta)/zCDP) or 1 (row weights, eps-DP).
        design_set: ``eigen`` (the workload's own per-attribute eigenbases), ``wavelet`` or
            ``fourier``.
        max_cells: refuse larger domains (every vector has n entries).
        method: Program 1 solver (implicit operators use the dual).
        tol, max_iter: Program 1's target relative gap and iteration cap (the certified gap
            reached is in the design's ``program1`` summary).
        seed: seed of the random combination that separates degenerate eigenspaces.
        progress: receives Program 1 iterations.

    Raises:
        NotApplicable: non-product terms, or a domain above ``max_cells``.
    """
    n = workload.domain.size
    if n > max_cells:
        raise NotApplicable(f"eigen-design (structured): {n:,} cells exceed max_cells = "
                            f"{max_cells:,}; weights and data vectors have one entry per cell")
    grams = factor_grams(workload)
    if design_set == "eigen":
        ab = eigen_bases(grams, seed)
        bases = ab.bases
        basis_note = ("exact eigen-queries (the attribute Grams commute)" if ab.all_exact
                      else "approximate on attribute(s) "
                           + ", ".join(workload.domain.names[i] for i, e in enumerate(ab.exact)
                                       if not e) + " (their Grams do not commute; see "
                           "structured.eigen_bases)")
        exact = ab.all_exact
    else:
        bases = [basis(design_set, m) for m in workload.domain.shape]
        basis_note, exact = f"{design_set} basis on every attribute", False
    # attributes on which every Gram is a I + b J: the constant vector and contrasts
    symmetric = [norm == 2 and len(bases) > 1 and m > 2 and _permutation_invariant(
        [vs[i] for _, vs in grams]) for i, m in enumerate(workload.domain.shape)]
    bases = [np.vstack([np.full(m, 1.0 / math.sqrt(m)), contrasts(m).T]) if sym else b
             for m, sym, b in zip(workload.domain.shape, symmetric, bases, strict=True)]
    groupings = ([_twin_grouping(b, [vs[i] for _, vs in grams]) for i, b in enumerate(bases)]
                 if norm == 2 and len(bases) > 1 else [])
    if any(g is not None for g in groupings):
        bases = [b if g is None else g.basis for b, g in zip(bases, groupings, strict=True)]
    costs = kron_costs(grams, bases)
    # the same numerical-rank rule as the dense path: directions whose cost is round-off
    # (<= ZERO_TOL relative) count as outside the workload's row space
    costs[costs <= ZERO_TOL * float(costs.max(initial=0.0))] = 0.0
    Q = Kron([Dense(B) for B in bases])
    power = program1_power(norm)
    # an implicit B cannot go to the interior point (k x k Newton systems with k = n)
    solver = "dual" if method == "ipm" else method
    if any(g is not None for g in groupings):
        res = _grouped_program1(costs, bases, groupings, solver, tol, max_iter, progress)
    else:
        B = Kron([Dense(np.abs(b) ** (2 if norm == 2 else 1)) for b in bases])
        res = solve_program1(costs, B, power=power, method=solver, tol=tol,
                             max_iter=max_iter, progress=progress)
    info = {"design_set": design_set, "structure": "kronecker", "basis": basis_note,
            "exact_eigenbasis": exact, "attribute_bases": bases}
    if exact:
        # the eigenvalues are known in closed form, so the SVD bound comes for free
        info["svd_bound"] = float(np.sqrt(costs).sum() ** 2 / n)
    return weighted_design(Q, costs, res.x, norm, complete=False, program1=(res.summary(),),
                           info=info)


def _permutation_invariant(grams: list[np.ndarray]) -> bool:
    """True when every Gram is ``a I + b J`` (identity, total, identity and total, ...)."""
    for V in grams:
        m = V.shape[0]
        off = V[~np.eye(m, dtype=bool)]
        scale = max(float(np.abs(V).max()), 1e-300)
        if np.ptp(np.diag(V)) > 1e-12 * scale or (m > 1 and np.ptp(off) > 1e-12 * scale):
            return False
    return True


#: Largest attribute whose twin values are searched (the test costs m**3 per Gram).
TWIN_MAX_VALUES = 512


@dataclass(frozen=True)
class TwinGrouping:
    """An attribute's design queries grouped by its twin classes (see ``_twin_grouping``).

    Attributes:
        basis: the attribute's basis (rows), its zero-sum part replaced by class contrasts.
        group: design group of every basis row.
        members: rows per group (k).
        rows: Program 1 constraint rows per group over the classes (groups x classes): a
            quotient row's squares, or 1/m_o on its class for the contrasts of class o.
    """

    basis: np.ndarray
    group: np.ndarray
    members: np.ndarray
    rows: np.ndarray


def _twin_grouping(basis: np.ndarray, grams: list[np.ndarray]) -> TwinGrouping | None:
    """Group an attribute's design queries by its twin values, or None when none are twins.

    With twin classes (values that every Gram of the attribute treats alike, ``linalg.twins``)
    every Gram is block diagonal between the span of the class indicators and each class's
    zero-sum vectors, a multiple of the identity on the latter. When each basis row lies in
    one of the two parts, the zero-sum rows are replaced by contrasts within each class
    (another eigenbasis of the same Grams when the basis was exact) and every class's
    contrasts form one group: averaging a strategy over the permutations inside the classes
    keeps it feasible, does not raise its error and gives them equal weights, so Program 1
    loses nothing. Its constraint columns shrink to one per class, its variables to one per
    quotient row plus one per class of two or more values.
    """
    m = basis.shape[0]
    if m > TWIN_MAX_VALUES:
        return None
    distinct: list[np.ndarray] = []
    for V in grams:
        if not any(np.array_equal(V, D) for D in distinct):
            distinct.append(V)
    labels = twin_classes(distinct)
    q = int(labels.max()) + 1
    if q == m:
        return None
    sizes = np.bincount(labels, minlength=q)
    U = np.zeros((m, q))
    U[np.arange(m), labels] = 1.0 / np.sqrt(sizes[labels])
    inside = np.linalg.norm(basis @ U, axis=1) ** 2  # share of each row in the quotient span
    quotient = inside > 1.0 - 1e-9
    if not (quotient | (inside < 1e-9)).all() or int(quotient.sum()) != q:
        return None
    new = basis.copy()
    group = np.empty(m, dtype=int)
    group[quotient] = np.arange(q)
    spare = iter(np.flatnonzero(~quotient))
    first = np.array([np.flatnonzero(labels == o)[0] for o in range(q)])
    rows = [(v * v)[first] for v in basis[quotient]]  # constant on each class
    members = [1] * q
    for o in np.flatnonzero(sizes > 1):
        cells = np.flatnonzero(labels == o)
        block = contrasts(len(cells)).T
        for row in block:
            i = next(spare)
            new[i] = 0.0
            new[i, cells] = row
            group[i] = len(members)
        members.append(len(cells) - 1)
        rows.append(np.where(np.arange(q) == o, 1.0 / len(cells), 0.0))
    return TwinGrouping(new, group, np.array(members), np.array(rows))


def _grouped_program1(costs: np.ndarray, bases: list[np.ndarray],
                      groupings: list[TwinGrouping | None], method: str, tol: float,
                      max_iter: int, progress: Progress | None) -> Program1Result:
    """Program 1 (L2) with one weight per group of design queries (``_twin_grouping``).

    A group of k queries with cost sum C and summed constraint row R is one query of weight
    k u with cost k C and row R / k: the original instance restricted to equal weights in
    each group (its closed form included). On SF1+ Program 1 shrinks from 1.5 million to 5,200
    variables. The grouped optimum is expanded back to every query.
    """
    shape = tuple(b.shape[0] for b in bases)
    grouped = costs.reshape(shape)
    rows = []
    for axis, (b, g) in enumerate(zip(bases, groupings, strict=True)):
        if g is None:
            rows.append(b * b)
            continue
        S = np.zeros((len(g.members), shape[axis]))
        S[g.group, np.arange(shape[axis])] = 1.0
        S *= g.members[:, None]
        grouped = np.moveaxis(np.tensordot(S, grouped, axes=(1, axis)), 0, axis)
        rows.append(g.rows)
    res = solve_program1(grouped.reshape(-1), Kron([Dense(r) for r in rows]), power=1.0,
                         method=method, tol=tol, max_iter=max_iter, progress=progress)
    x = res.x.reshape(grouped.shape)
    for axis, g in enumerate(groupings):
        if g is not None:
            x = np.take(x, g.group, axis=axis)
            per_query = 1.0 / g.members[g.group]
            x = x * per_query.reshape([len(g.group) if a == axis else 1 for a in range(x.ndim)])
    return replace(res, x=x.reshape(-1))


def kron_query_variances(workload: Workload, design: WeightedDesign) -> np.ndarray:
    """Unit per-query variances ``w^T (A^T A)^+ w`` of a Kronecker design, term by term.

    For a product row ``w = kron_k f_k``: ``sum_i (Q w)_i**2 / lambda_i**2`` with
    ``Q w = kron_k (Q_k f_k)``, i.e. one Kronecker mat-vec of ``1 / lambda**2`` per term.
    """
    s = design.strategy
    inv = design.solver.inv if design.solver is not None else None
    if inv is None or not isinstance(s.queries, Kron):
        raise NotApplicable("kron_query_variances needs an uncompleted Kronecker design")
    bases = [f.dense() for f in s.queries.factors]
    parts = []
    for t in workload.terms:
        factors = []
        for Qk, f in zip(bases, t.full_factors(), strict=True):
            F = f.dense()
            factors.append(((Qk @ F.T) ** 2).T)  # (m_k x n_k)
        parts.append(t.weight**2 * kmatvec(factors, inv))
    return np.concatenate(parts)
