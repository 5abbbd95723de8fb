"""``tr (W^T W)^(1/2)`` of a union of Kronecker products, exactly, block by block.

For a union ``W = [w_1 W_1; ...; w_J W_J]`` of products ``W_j = F_1j x ... x F_dj`` the Gram
is ``W^T W = sum_j w_j**2 V_1j x ... x V_dj`` with ``V_ij = F_ij^T F_ij``. On one attribute i,
call two values c, c' *exchangeable* when swapping them leaves every Gram ``V_ij`` (every term)
unchanged. Exchangeability is an equivalence (the swaps that keep the Grams generate a group),
and its classes (*orbits*) split the attribute's space into invariant subspaces of every
``V_ij`` at once:

* for an orbit O of m >= 2 values, the vectors on O summing to zero: ``V_ij`` acts on them as
  the scalar ``V_ij[c, c] - V_ij[c, c']`` (c != c' in O), with multiplicity ``m - 1``;
* the span of the orbits' indicator vectors (dimension q = number of orbits), where ``V_ij``
  acts as the q x q *quotient* ``U^T V_ij U`` (U: the normalised indicators).

A marginal-like factor (Gram ``a I + b 1 1^T``: identity, total, ``[I; T]``) makes the whole
attribute one orbit: the total and residual subspaces of HDMM Thm. 10. Taking one piece per
attribute gives the blocks of ``W^T W``: a block's matrix is ``sum_j c_j (x)_i Q_ij`` over the
attributes that took their quotient (scalars multiplied into ``c_j``), and it repeats with the
product of the chosen multiplicities. Each block's eigenvalues come exactly from the smaller of
its cells-side Gram and its queries-side ``B B^T`` (the same non-zero spectrum). On SF1 (29,440
cells) the largest block has 416 rows: race splits into 8 orbits, age into 26.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.linalg.marginals import factor_pair, is_marginal_like
from engine.linalg.matrix import Identity, Matrix, Ones
from engine.linalg.pinv import psd_sqrt_trace
from engine.workloads.blocks import Block

#: Largest attribute whose factor Grams are formed to find its orbits (8 bytes x n**2 each).
ORBIT_LIMIT = 4096
#: Largest attribute whose factor Gram is formed to check that it is marginal-like.
MARGINAL_CHECK_LIMIT = 16384
#: Most blocks enumerated for one workload (each costs at least one pass over the terms).
BLOCK_LIMIT = 200_000
#: Most work (sum of the cubed sides of the blocks) in units of one block at the dense limit.
WORK_FACTOR = 2


class BlockTooLargeError(Exception):
    """A block of the union whose smaller side exceeds the dense limit (or too many blocks)."""


@dataclass(frozen=True)
class Piece:
    """One invariant piece of an attribute: its per-term action and its multiplicity.

    ``scalars`` (one per term) when the piece is 1-dimensional, else ``quotients`` (one q x q
    matrix per term) and ``indicators`` (n x q, normalised orbit indicators) for the queries
    side.
    """

    multiplicity: int
    scalars: np.ndarray | None = None
    quotients: tuple[np.ndarray, ...] = ()
    indicators: np.ndarray | None = None

    @property
    def dimension(self) -> int:
        """Rows of the piece's per-term matrices (1 for a scalar piece)."""
        return 1 if self.scalars is not None else self.quotients[0].shape[0]


def factor_key(factor: Matrix) -> tuple:
    """A key shared by factors that are certainly the same matrix (same block spec)."""
    if isinstance(factor, Block):
        return ("block", type(factor).__name__, factor.shape, repr(factor.spec()))
    if isinstance(factor, Identity):
        return ("identity", factor.shape)
    if isinstance(factor, Ones):
        return ("ones", factor.shape)
    return ("object", id(factor))


def gram_of(factor: Matrix) -> np.ndarray:
    """The explicit Gram ``F^T F`` of one attribute's factor."""
    return factor.gram_array() if isinstance(factor, Block) else factor.gram().dense()


def is_marginal_factor(factor: Matrix) -> bool:
    """True when the factor's Gram is ``a I + b 1 1^T`` (identity, total, ``[I; T]``, ...)."""
    if isinstance(factor, Identity) or (isinstance(factor, Ones) and factor.shape[0] == 1):
        return True
    if factor.shape[1] > MARGINAL_CHECK_LIMIT:
        return False
    diag = factor.column_norms(2)
    if diag.size > 1 and not np.allclose(diag, diag[0], rtol=1e-12, atol=0.0):
        return False
    return is_marginal_like(gram_of(factor))


def marginal_pair(factor: Matrix) -> tuple[float, float]:
    """``(b, a)`` of a marginal-like factor's Gram ``a I + b 1 1^T``."""
    n = factor.shape[1]
    if n > 1 and isinstance(factor, Identity):
        return 0.0, 1.0
    if n > 1 and isinstance(factor, Ones) and factor.shape[0] == 1:
        return 1.0, 0.0
    return factor_pair(gram_of(factor))


def orbits(grams: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The classes of exchangeable values: c ~ c' when swapping c and c' keeps every Gram.

    A swap keeps V exactly when ``V[c, c] = V[c', c']`` and ``V[c, x] = V[c', x]`` for every
    other x. Candidates share their diagonal and sorted rows (compared through one random
    projection of the sorted row: equal rows give bitwise equal projections); each is checked
    against one member of every class found so far (the relation is an equivalence). A pair
    missed by round-off only makes the classes finer, which the blocks allow too. Index
    arrays, sorted, in order of their smallest value.
    """
    n = grams[0].shape[0]
    scale = max(max(float(np.abs(V).max(initial=0.0)) for V in grams), 1e-300)
    tol = 1e-12 * scale
    probe = np.random.default_rng(0).standard_normal(n)
    signature = np.column_stack([np.diag(V) for V in grams]
                                + [np.sort(V, axis=1) @ probe for V in grams])
    _, group = np.unique(signature, axis=0, return_inverse=True)
    classes: list[list[int]] = []
    open_classes: dict[int, list[int]] = {}  # signature group -> indices into classes
    for c in range(n):
        home = None
        for k in open_classes.get(int(group[c]), []):
            if _exchangeable(grams, c, classes[k][0], tol):
                home = k
                break
        if home is None:
            open_classes.setdefault(int(group[c]), []).append(len(classes))
            classes.append([c])
        else:
            classes[home].append(c)
    return [np.array(members) for members in classes]


def _exchangeable(grams: Sequence[np.ndarray], c: int, r: int, tol: float) -> bool:
    for V in grams:
        if abs(V[c, c] - V[r, r]) > tol:
            return False
        diff = V[c] - V[r]
        diff[[c, r]] = 0.0
        if np.abs(diff).max() > tol:
            return False
    return True


def attribute_pieces(factors: Sequence[Matrix]) -> list[Piece]:
    """The invariant pieces of one attribute, given its factor in every term (term order).

    The first piece is the quotient (orbit-indicator) space; the others are the residual
    pieces, merged when their per-term scalars agree (multiplicities added) and dropped when
    every scalar is zero (they add nothing to ``tr (W^T W)^(1/2)``).
    """
    n = factors[0].shape[1]
    keys = [factor_key(f) for f in factors]
    distinct = dict(zip(keys, factors, strict=True))
    if all(is_marginal_factor(f) for f in distinct.values()):
        pairs = {k: marginal_pair(f) for k, f in distinct.items()}
        total = np.array([pairs[k][1] + n * pairs[k][0] for k in keys])
        pieces = [Piece(1, scalars=total)]
        residual = np.array([pairs[k][1] for k in keys])
        if n > 1 and np.any(residual > 0):
            pieces.append(Piece(n - 1, scalars=residual))
        return pieces
    if n > ORBIT_LIMIT:
        raise BlockTooLargeError(f"an attribute of {n:,} values is not marginal-like (orbits "
                                 f"are found up to {ORBIT_LIMIT:,} values)")
    grams = {k: gram_of(f) for k, f in distinct.items()}
    found = orbits(list(grams.values()))
    order = np.concatenate(found)
    starts = np.cumsum([0] + [len(o) for o in found[:-1]])
    norm = 1.0 / np.sqrt([len(o) for o in found])

    def quotient(V: np.ndarray) -> np.ndarray:
        summed = np.add.reduceat(np.add.reduceat(V[np.ix_(order, order)], starts, axis=0),
                                 starts, axis=1)
        return summed * norm[:, None] * norm[None, :]

    quotients = {k: quotient(V) for k, V in grams.items()}
    if len(found) == 1:
        pieces = [Piece(1, scalars=np.array([quotients[k][0, 0] for k in keys]))]
    else:
        indicators = np.zeros((n, len(found)))
        for j, members in enumerate(found):
            indicators[members, j] = norm[j]
        pieces = [Piece(1, quotients=tuple(quotients[k] for k in keys), indicators=indicators)]
    merged: dict[tuple[float, ...], int] = {}
    for members in found:
        if len(members) < 2:
            continue
        c, c1 = int(members[0]), int(members[1])
        scalars = tuple(float(grams[k][c, c] - grams[k][c, c1]) for k in keys)
        if any(s > 0 for s in scalars):
            merged[scalars] = merged.get(scalars, 0) + len(members) - 1
    pieces += [Piece(mult, scalars=np.array(s)) for s, mult in merged.items()]
    return pieces


def union_sqrt_trace(weights: Sequence[float], factors: Sequence[Sequence[Matrix]],
                     dense_limit: int, check_only: bool = False) -> float:
    """``tr (W^T W)^(1/2)`` (the nuclear norm of W) of the union ``[w_j (x)_i F_ij]``.

    Args:
        weights: one weight per term.
        factors: per term, its factor on every attribute (the same attributes for all).
        dense_limit: largest matrix side eigendecomposed for one block.
        check_only: only check that every block fits (returns 0.0 when they do).

    Raises:
        BlockTooLargeError: when a block exceeds ``dense_limit`` on both sides, the blocks
            together need more than ``WORK_FACTOR`` blocks of that side, or there are more
            than ``BLOCK_LIMIT`` blocks.
    """
    d = len(factors[0])
    pieces = [attribute_pieces([fs[i] for fs in factors]) for i in range(d)]
    coefficients = np.asarray(weights, float) ** 2
    _BlockSum(pieces, factors, dense_limit, dry=True).total(coefficients)
    if check_only:
        return 0.0
    return _BlockSum(pieces, factors, dense_limit).total(coefficients)


class _BlockSum:
    """Walks the tree of piece choices, one attribute at a time, and sums the blocks (a
    ``dry`` walk only checks their sizes, so a union that does not fit fails at once)."""

    def __init__(self, pieces: list[list[Piece]], factors: Sequence[Sequence[Matrix]],
                 dense_limit: int, dry: bool = False) -> None:
        self.dry = dry
        self.pieces = pieces
        self.factors = factors
        self.limit = dense_limit
        self.blocks = 0
        self.work = 0.0
        self.cache: dict[tuple, float] = {}
        self.sides: dict[tuple[int, int], np.ndarray] = {}

    def total(self, coefficients: np.ndarray) -> float:
        return self._walk(0, coefficients, ())

    def _walk(self, i: int, c: np.ndarray, matrices: tuple[int, ...]) -> float:
        if not np.any(c > 0):
            return 0.0
        if i == len(self.pieces):
            self.blocks += 1
            if self.blocks > BLOCK_LIMIT:
                raise BlockTooLargeError(f"the union has more than {BLOCK_LIMIT:,} blocks")
            return self._block(c, matrices)
        out = 0.0
        for piece in self.pieces[i]:
            if piece.scalars is not None:
                out += piece.multiplicity * self._walk(i + 1, c * piece.scalars, matrices)
            else:
                out += piece.multiplicity * self._walk(i + 1, c, (*matrices, i))
        return out

    def _block(self, c: np.ndarray, matrices: tuple[int, ...]) -> float:
        if not matrices:
            return math.sqrt(float(c.sum()))
        key = (matrices, c.tobytes())
        if key not in self.cache:
            self.cache[key] = self._eigen(c, matrices)
        return self.cache[key]

    def _eigen(self, c: np.ndarray, matrices: tuple[int, ...]) -> float:
        active = np.flatnonzero(c > 0)
        cells = math.prod(self.pieces[i][0].dimension for i in matrices)
        queries = sum(math.prod(self.factors[j][i].shape[0] for i in matrices)
                      for j in active)
        side = min(cells, queries)
        if side > self.limit:
            raise BlockTooLargeError(f"a block of the union has {cells:,} cells and "
                                     f"{queries:,} queries (the limit is {self.limit:,} on "
                                     f"the smaller side)")
        self.work += float(side) ** 3
        if self.work > WORK_FACTOR * float(self.limit) ** 3:
            raise BlockTooLargeError(f"the blocks of the union need more than {WORK_FACTOR} "
                                     f"eigendecompositions of side {self.limit:,}")
        if self.dry:
            return 0.0
        if cells <= queries:
            G = np.zeros((cells, cells))
            for j in active:
                G += c[j] * _kron([self.pieces[i][0].quotients[j] for i in matrices])
            return psd_sqrt_trace(G)
        sides = {j: [self._side(i, j) for i in matrices] for j in active}
        rows = [math.prod(z.shape[0] for z in sides[j]) for j in active]
        K = np.zeros((sum(rows), sum(rows)))
        at = np.concatenate([[0], np.cumsum(rows)])
        for a, j in enumerate(active):
            for b, k in enumerate(active[: a + 1]):
                block = math.sqrt(c[j] * c[k]) * _kron(
                    [zj @ zk.T for zj, zk in zip(sides[j], sides[k], strict=True)])
                K[at[a]:at[a + 1], at[b]:at[b + 1]] = block
                K[at[b]:at[b + 1], at[a]:at[a + 1]] = block.T
        return psd_sqrt_trace(K)

    def _side(self, i: int, j: int) -> np.ndarray:
        """``F_ij U_i``: term j's queries on attribute i, in the orbit coordinates."""
        if (i, j) not in self.sides:
            self.sides[(i, j)] = self.factors[j][i].dense() @ self.pieces[i][0].indicators
        return self.sides[(i, j)]


def _kron(arrays: list[np.ndarray]) -> np.ndarray:
    out = np.ones((1, 1))
    for a in arrays:
        out = np.kron(out, a)
    return out
