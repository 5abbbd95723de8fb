"""Symmetry reduction of a residual's optimal SDP (Eq. 4) through twin values.

Two values i, j of an attribute are *twins* for a residual when swapping them leaves every
per-attribute Gram of the residual's pieces unchanged (``G_ii = G_jj`` and ``G_ik = G_jk`` for
every other k). Twinhood is an equivalence; its classes ("orbits", sizes m_o) generate a
product of symmetric groups under which the residual's Gram ``G = sum_k c_k kron_a G_ak`` is
invariant, and so, by convexity, is an optimal strategy. Census workloads are full of twins:
sex and Hispanic origin (two values, centred: always twins), the 51 states of SF1+ (identity
and total), ages inside one P12 bin, race codes with the same number of races.

Per attribute, the orthogonal basis ``T_a = [u_o | E_o]`` (class indicators over sqrt(m_o),
then an orthonormal basis of each class's zero-sum vectors) splits the values into a
*quotient* part (one coordinate per class) and one *difference* part per class of two or more
values, on which every invariant matrix is a multiple of the identity (Schur). Over the
residual's attributes the Gram and every invariant strategy are therefore block diagonal, one
block per choice of part on each attribute: the quotient attributes keep a small explicit
matrix (the product of their class counts), each difference attribute contributes a scalar
and a multiplicity ``m_o - 1``. The privacy constraint ``diag V <= 1`` becomes one constraint
per class tuple j, to which block b contributes ``w_b(i) V_b[i, i]`` with
``w_b = prod_quotient 1/m * prod_difference (1 - 1/m)``.

The dual of Eq. 4 keeps its form (``optimal.py``): weights mu on the class tuples,
``K_b = A_b^T diag(w_b mu) A_b`` per block, value ``(sum_b tr K_b^{1/2})**2``, gradient
``d_j = sum_b w_b d_b`` with ``d_b = diag(A_b K_b^{-1/2} A_b^T)``, and the feasible primal
``V_b = A_b K_b^{-1/2} A_b^T / max_j d_j``, so the certificate is the same relative gap. SF1's
largest residual (race x age, 7,360 cells, Gram rank 829) becomes 8 x 26 class tuples.

The solution is a :class:`BlockSub`: the per-attribute bases, then one small strategy per
block applied along the block's quotient axes (identity along its difference axes).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from engine.linalg.twins import contrasts, twin_classes
from engine.mechanisms.residual.decomposition import GramStore, ResidualWorkload
from engine.mechanisms.residual.optimal import FixedPoint
from engine.mechanisms.residual.submechanisms import SubMechanism
from engine.progress import Progress, report

#: Largest attribute (values) whose twins are searched (the test costs m**3 per Gram).
TWIN_MAX_VALUES = 512
#: Largest number of class tuples (dual variables) the reduction solves.
BLOCK_LIMIT = 2048
#: Relative eigenvalue below which a direction of a block's Gram is outside its range.
RANGE_RCOND = 1e-12
#: Newton takes over once the fixed point's gap is below this, or after this many steps.
NEWTON_GAP, NEWTON_AFTER = 1e-3, 50
#: Cap on Newton steps.
NEWTON_STEPS = 200


@dataclass(frozen=True)
class AttributeSplit:
    """One attribute's classes and its basis ``T = [quotient | differences]`` (m x m).

    Attributes:
        labels: class of every value.
        sizes: values per class (q,).
        basis: orthogonal m x m; column o < q is the class indicator over sqrt(m_o), then the
            difference columns of each class of two or more values, class by class.
        parts: ``None`` for the quotient, else a class with two or more values.
        ranges: columns of ``basis`` for each part (same order as ``parts``).
    """

    labels: np.ndarray
    sizes: np.ndarray
    basis: np.ndarray
    parts: tuple[int | None, ...]
    ranges: tuple[slice, ...]

    @staticmethod
    def of(labels: np.ndarray) -> AttributeSplit:
        """The split of the values by class labels 0..q-1."""
        m = len(labels)
        q = int(labels.max()) + 1
        sizes = np.bincount(labels, minlength=q)
        T = np.zeros((m, m))
        parts: list[int | None] = [None]
        ranges = [slice(0, q)]
        col = q
        for o in range(q):
            members = np.flatnonzero(labels == o)
            T[members, o] = 1.0 / math.sqrt(len(members))
            if len(members) > 1:
                T[members, col : col + len(members) - 1] = contrasts(len(members))
                parts.append(o)
                ranges.append(slice(col, col + len(members) - 1))
                col += len(members) - 1
        return AttributeSplit(labels, sizes, T, tuple(parts), tuple(ranges))

    @property
    def classes(self) -> int:
        """Number of classes q."""
        return len(self.sizes)


@dataclass(frozen=True)
class Block:
    """One block of the reduced problem.

    Attributes:
        parts: per attribute, None (quotient) or the class of its difference part.
        quotient: positions (attributes of the residual) of the quotient parts.
        multiplicity: ``prod (m_o - 1)`` over the difference parts.
        index: for each row of the block (quotient class tuples in C order), its constraint
            (class tuple over every attribute, flattened).
        weight: ``w_b`` per row.
        gram: the block's Gram (rows x rows), multiplicity included.
    """

    parts: tuple[int | None, ...]
    quotient: tuple[int, ...]
    multiplicity: int
    index: np.ndarray
    weight: np.ndarray
    gram: np.ndarray


def _splits_gram(split: AttributeSplit, G: np.ndarray) -> bool:
    """True when ``T^T G T`` is block diagonal over the parts with scalar difference blocks
    (what the twin classes promise; guards against round-off in the twin test)."""
    Gt = split.basis.T @ G @ split.basis
    expected = np.zeros_like(Gt)
    for part, r in zip(split.parts, split.ranges, strict=True):
        block = Gt[r, r]
        expected[r, r] = (
            block
            if part is None
            else np.eye(block.shape[0]) * (float(np.trace(block)) / block.shape[0])
        )
    scale = max(float(np.abs(Gt).max()), 1e-300)
    return float(np.abs(Gt - expected).max()) <= 1e-9 * scale


def _piece_factor(G: np.ndarray, split: AttributeSplit, part: int | None) -> np.ndarray:
    """``T^T G T`` on one part: the quotient block (q x q) or the difference scalar (1 x 1)."""
    r = split.ranges[split.parts.index(part)]
    Gt = split.basis[:, r].T @ G @ split.basis[:, r]
    if part is None:
        return Gt
    return np.array([[float(np.trace(Gt)) / Gt.shape[0]]])


@dataclass
class SymmetricProblem:
    """A residual's Eq. 4 reduced by its twin classes (see the module docstring)."""

    sizes: tuple[int, ...]
    splits: list[AttributeSplit]
    blocks: list[Block]
    constraints: int

    @staticmethod
    def build(res: ResidualWorkload, store: GramStore) -> SymmetricProblem | None:
        """The reduction of a residual whose pieces are all Kronecker products, or None when
        it does not pay (no twins, an attribute too large to search, a quotient block above
        ``BLOCK_LIMIT``) or does not apply (row-factor pieces)."""
        if any(kind != "kron" for kind, _ in res.pieces) or not res.attrs:
            return None
        if max(res.sizes) > TWIN_MAX_VALUES:
            return None
        total = res.trace
        pieces = [
            (coef / total, [store[k] for k in keys]) for (_, keys), (coef, _) in res.pieces.items()
        ]
        splits = []
        for a in range(len(res.sizes)):
            distinct = {id(g): g for _, gs in pieces for g in [gs[a]]}
            splits.append(AttributeSplit.of(twin_classes(list(distinct.values()))))
        classes = [s.classes for s in splits]
        constraints = math.prod(classes)
        if constraints >= res.cells or constraints > BLOCK_LIMIT:
            return None
        if not all(
            _splits_gram(split, gs[a]) for a, split in enumerate(splits) for _, gs in pieces
        ):
            return None
        # every piece's per-attribute factor, by part (computed once per distinct Gram)
        cache: dict[tuple[int, int | None, int], np.ndarray] = {}

        def factor(a: int, part: int | None, G: np.ndarray) -> np.ndarray:
            key = (a, part, id(G))
            if key not in cache:
                cache[key] = _piece_factor(G, splits[a], part)
            return cache[key]

        blocks = []
        strides = np.array([math.prod(classes[a + 1 :]) for a in range(len(classes))])
        for parts in itertools.product(*[s.parts for s in splits]):
            quotient = tuple(a for a, p in enumerate(parts) if p is None)
            gram: np.ndarray | None = None
            for coef, grams in pieces:
                term = np.array([[coef]])
                for a, p in enumerate(parts):
                    term = np.kron(term, factor(a, p, grams[a]))
                gram = term if gram is None else gram + term
            assert gram is not None
            multiplicity = math.prod(
                int(splits[a].sizes[p]) - 1 for a, p in enumerate(parts) if p is not None
            )
            if float(np.trace(gram)) <= 1e-14:
                continue
            grid = (
                np.array(list(itertools.product(*[range(classes[a]) for a in quotient])), dtype=int)
                if quotient
                else np.zeros((1, 0), dtype=int)
            )
            index = np.zeros(len(grid), dtype=int)
            weight = np.ones(len(grid))
            for a, p in enumerate(parts):
                m = splits[a].sizes
                if p is None:
                    col = grid[:, quotient.index(a)]
                    index += strides[a] * col
                    weight /= m[col]
                else:
                    index += strides[a] * p
                    weight *= 1.0 - 1.0 / m[p]
            blocks.append(
                Block(
                    parts,
                    quotient,
                    multiplicity,
                    index,
                    weight,
                    multiplicity * (gram + gram.T) / 2.0,
                )
            )
        # the blocks hold all of the trace-1 Gram (T is orthogonal): nothing was lost
        if abs(sum(float(np.trace(b.gram)) for b in blocks) - 1.0) > 1e-9:
            return None
        return SymmetricProblem(res.sizes, splits, blocks, constraints)


class _BlockDual:
    """The dual of the reduced problem: ``evaluate(mu) -> (sum sqrt e, d, eigenvalues,
    eigenvectors)`` (per block lists) and ``hessian(support, e, Q)`` of ``sum_b tr K_b^{1/2}``
    (negative semi-definite) over the class tuples in ``support``."""

    def __init__(self, problem: SymmetricProblem) -> None:
        self.problem = problem
        self.J = problem.constraints
        scale = max(float(np.linalg.eigvalsh(b.gram).max()) for b in problem.blocks)
        self.U, self.w, self.A = [], [], []
        for b in problem.blocks:
            w, U = np.linalg.eigh(b.gram)
            keep = w > RANGE_RCOND * scale
            self.U.append(U[:, keep])
            self.w.append(w[keep])
            self.A.append(U[:, keep] * np.sqrt(w[keep]))

    def evaluate(self, mu: np.ndarray) -> tuple[float, np.ndarray, list, list]:
        trm = 0.0
        d = np.zeros(self.J)
        es, Qs = [], []
        for b, A in zip(self.problem.blocks, self.A, strict=True):
            if A.shape[1] == 0:
                es.append(np.zeros(0))
                Qs.append(np.zeros((0, 0)))
                continue
            nu = b.weight * mu[b.index]
            K = (A.T * nu) @ A
            e, Q = sla.eigh((K + K.T) / 2.0, driver="evd")
            e = np.maximum(e, 1e-300)
            Bu = A @ (Q * e**-0.25)
            d[b.index] += b.weight * np.einsum("ij,ij->i", Bu, Bu)
            trm += float(np.sqrt(e).sum())
            es.append(e)
            Qs.append(Q)
        return trm, d, es, Qs

    def hessian(self, support: np.ndarray, es: list, Qs: list) -> np.ndarray:
        position = np.full(self.J, -1)
        position[support] = np.arange(len(support))
        H = np.zeros((len(support), len(support)))
        for b, A, e, Q in zip(self.problem.blocks, self.A, es, Qs, strict=True):
            rows = np.flatnonzero(position[b.index] >= 0)
            if not len(rows) or A.shape[1] == 0:
                continue
            B = A[rows] @ Q
            s = np.sqrt(e)
            gamma = -1.0 / (s[:, None] * s[None, :] * (s[:, None] + s[None, :]))
            row, col = np.triu_indices(len(e))
            weight = np.where(row == col, gamma[row, col], 2.0 * gamma[row, col])
            Z = B[:, row] * B[:, col]
            Hb = 0.5 * (Z * weight) @ Z.T
            wb = b.weight[rows]
            at = position[b.index[rows]]
            H[np.ix_(at, at)] += wb[:, None] * Hb * wb[None, :]
        return H


@dataclass(frozen=True)
class SymmetricSolution:
    """A certified solution of the reduced problem and its strategy."""

    mechanism: BlockSub
    loss: float
    lower: float
    iterations: int
    newton_steps: int
    seconds: float

    @property
    def gap(self) -> float:
        """Certified relative optimality gap ``(loss - lower) / loss``."""
        return (self.loss - self.lower) / self.loss if self.loss > 0 else 0.0


def solve_symmetric(
    problem: SymmetricProblem,
    tol: float = 1e-10,
    max_iter: int = 20_000,
    progress: Progress | None = None,
    label: str = "",
) -> SymmetricSolution:
    """Certified optimum of the reduced Eq. 4 (the loss of the residual's trace-1 Gram).

    Two phases, as in ``optimal.solve_optimal``: the multiplicative fixed point
    ``mu <- mu (d / sum sqrt e)**RHO``, then a log-barrier Newton method on every class tuple
    (:func:`_barrier_newton`; the reduced problems are small). The returned strategy is the
    best feasible primal point seen and ``lower`` the best dual bound.
    """
    start = time.perf_counter()
    dual = _BlockDual(problem)
    solve = FixedPoint(dual.evaluate, np.full(problem.constraints, 1.0 / problem.constraints))
    seen = solve.seen
    newton_steps = 0
    while solve.running(tol, max_iter - solve.iterations):
        if solve.gap < NEWTON_GAP or solve.iterations >= NEWTON_AFTER:
            _, newton_steps = _barrier_newton(
                dual, solve.weights, seen.record, tol,
                min(NEWTON_STEPS, max_iter - solve.iterations), progress, label
            )
            break
        solve.step()
        if solve.iterations % 10 == 0:
            report(progress, solve.iterations, seen.upper, label)
    assert seen.best is not None
    es, Qs, dmax = seen.best
    strategies = []
    for U, w, A, e, Qb in zip(dual.U, dual.w, dual.A, es, Qs, strict=True):
        if A.shape[1] == 0:
            strategies.append(None)
            continue
        basis = ((A @ (Qb * e**-0.25)) / math.sqrt(dmax)).T
        pinv = (U / np.sqrt(w)) @ (Qb * e**0.25) * math.sqrt(dmax)
        strategies.append((basis, pinv))
    sub = BlockSub(
        problem.sizes,
        problem.splits,
        [(b, s) for b, s in zip(problem.blocks, strategies, strict=True) if s is not None],
    )
    return SymmetricSolution(
        sub, seen.upper, seen.lower, solve.iterations, newton_steps, time.perf_counter() - start
    )


def _barrier_newton(
    dual: _BlockDual,
    mu: np.ndarray,
    record: Callable[[float, np.ndarray, list, list], float],
    tol: float,
    max_steps: int,
    progress: Progress | None,
    label: str,
) -> tuple[np.ndarray, int]:
    """Maximise ``sum_b tr K_b^{1/2}`` over the simplex by Newton's method.

    Each step first tries the plain Newton step on the simplex (quadratic convergence at a
    non-degenerate optimum) and keeps it when it stays positive and halves the slack
    ``max d / sum sqrt e - 1``; otherwise a damped step on the barrier objective
    ``f(mu) + tau sum log mu`` (``tau`` shrinks tenfold once a full step is taken). Stops at
    the tolerance, or after ten steps without a 0.1 % smaller certified gap.

    Returns:
        The last weights and the number of Newton steps.
    """
    J = len(mu)
    mu = np.maximum(mu, 1e-12 / J)
    mu /= mu.sum()
    trm, d, e, Q = dual.evaluate(mu)
    best = record(trm, d, e, Q)
    tau = max(float(d.max()) / trm - 1.0, 1e-8) * trm / (2.0 * J)
    since_best = steps = 0
    everything = np.arange(J)
    while steps < max_steps:
        steps += 1
        H = -dual.hessian(everything, e, Q)
        g = d / 2.0
        slack = float(d.max()) / trm - 1.0
        plain = _simplex_step(H, g, 1e-12 * float(np.diag(H).max(initial=1.0)) + 1e-300)
        out = None
        if plain is not None and (mu + plain > 0).all():
            candidate = mu + plain
            trial = dual.evaluate(candidate)
            if trial[0] >= trm * (1.0 - 1e-12) and float(trial[1].max()) / trial[0] - 1.0 < (
                0.5 * slack
            ):
                out, mu = trial, candidate
        if out is None:
            M = H + np.diag(tau / mu**2)
            grad = g + tau / mu
            delta = _simplex_step(M, grad, 0.0)
            if delta is None:
                break
            shrinking = delta < 0
            t = (
                min(1.0, 0.99 * float(np.min(-mu[shrinking] / delta[shrinking])))
                if shrinking.any()
                else 1.0
            )
            full = t == 1.0
            merit = trm + tau * float(np.log(mu).sum())
            slope = float(grad @ delta)
            while True:
                candidate = mu + t * delta
                trial = dual.evaluate(candidate)
                if (
                    trial[0] + tau * float(np.log(candidate).sum()) >= merit + 1e-4 * t * slope
                    or t < 1e-12
                ):
                    break
                t /= 2.0
                full = False
            out, mu = trial, candidate
            if full:
                tau *= 0.1
        trm, d, e, Q = out
        gap = record(trm, d, e, Q)
        report(progress, steps, float("nan"), label)
        since_best = 0 if gap < best * (1.0 - 1e-3) else since_best + 1
        best = min(best, gap)
        if gap <= tol or since_best >= 10:
            break
    return mu, steps


def _simplex_step(M: np.ndarray, g: np.ndarray, ridge: float) -> np.ndarray | None:
    """The step D maximising ``g.D - D.M.D / 2`` subject to ``sum(D) = 0``, or None when
    ``M + ridge I`` is not positive definite."""
    M = M.copy()
    M[np.diag_indices_from(M)] += ridge
    try:
        factor = sla.cho_factor(M, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    Mg = sla.cho_solve(factor, g, check_finite=False)
    M1 = sla.cho_solve(factor, np.ones_like(g), check_finite=False)
    return Mg - (Mg.sum() / M1.sum()) * M1


def _mode_apply(mats: Sequence[np.ndarray], x: np.ndarray) -> np.ndarray:
    """Apply ``mats[a]`` along axis a of x (trailing axes beyond ``len(mats)`` untouched)."""
    for a, M in enumerate(mats):
        x = np.moveaxis(np.tensordot(M, x, axes=(1, a)), 0, a)
    return x


class BlockSub(SubMechanism):
    """The strategy of a symmetry-reduced residual: ``T`` per attribute, then per block its
    small strategy ``B_b`` along the block's quotient axes (identity along the others).

    The release lists the blocks in order, each as ``B_b`` applied to the block's slice of
    the transformed marginal (rows of ``B_b`` first, then the difference axes in attribute
    order, C order).
    """

    kind = "symmetric"

    def __init__(
        self,
        sizes: Sequence[int],
        splits: Sequence[AttributeSplit],
        blocks: Sequence[tuple[Block, tuple[np.ndarray, np.ndarray]]],
    ) -> None:
        self.sizes = tuple(sizes)
        self.splits = list(splits)
        self.blocks = list(blocks)
        self._slices = [
            tuple(s.ranges[s.parts.index(p)] for s, p in zip(splits, b.parts, strict=True))
            for b, _ in blocks
        ]

    @property
    def outputs(self) -> int:
        return sum(s[0].shape[0] * b.multiplicity for b, s in self.blocks)

    def _to_block(self, xt: np.ndarray, k: int) -> np.ndarray:
        """The block's slice of the transformed tensor as (quotient rows, everything else)."""
        block = self.blocks[k][0]
        part = xt[self._slices[k]]
        part = np.moveaxis(part, block.quotient, tuple(range(len(block.quotient))))
        rows = math.prod(part.shape[: len(block.quotient)])
        return part.reshape(rows, -1)

    def _from_block(self, values: np.ndarray, k: int, out: np.ndarray) -> None:
        """Write (quotient rows, everything else) values into the block's slice of ``out``."""
        block = self.blocks[k][0]
        target = out[self._slices[k]]
        q = len(block.quotient)
        moved_shape = tuple(target.shape[a] for a in block.quotient) + tuple(
            target.shape[a] for a in range(target.ndim) if a not in block.quotient
        )
        back = np.moveaxis(values.reshape(moved_shape), tuple(range(q)), block.quotient)
        out[self._slices[k]] = back

    def _transform(self, x: np.ndarray, forward: bool) -> np.ndarray:
        mats = [s.basis.T if forward else s.basis for s in self.splits]
        return _mode_apply(mats, x)

    def release(self, x: np.ndarray) -> np.ndarray:
        xt = self._transform(np.asarray(x, dtype=float).reshape(self.sizes), True)
        return np.concatenate(
            [(s[0] @ self._to_block(xt, k)).reshape(-1) for k, (_, s) in enumerate(self.blocks)]
        )

    def _adjoint(self, w: np.ndarray, which: int) -> np.ndarray:
        w = np.asarray(w, dtype=float).reshape(-1)
        xt = np.zeros(self.sizes)
        at = 0
        for k, (block, s) in enumerate(self.blocks):
            r = s[0].shape[0]
            size = r * block.multiplicity
            part = w[at : at + size].reshape(r, -1)
            at += size
            M = s[0].T if which == 0 else s[1]
            self._from_block(M @ part, k, xt)
        return self._transform(xt, False)

    def release_adjoint(self, w: np.ndarray) -> np.ndarray:
        return self._adjoint(w, 0)

    def estimate(self, w: np.ndarray) -> np.ndarray:
        return self._adjoint(w, 1)

    def vdag_apply(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        cols = X.reshape(self.sizes + (-1,))
        xt = self._transform(cols, True)
        out = np.zeros_like(xt)
        for k, (_, s) in enumerate(self.blocks):
            P = s[1]
            self._from_block(P @ (P.T @ self._to_block(xt, k)), k, out)
        return self._transform(out, False).reshape(X.shape)

    def quad_product(self, factors: Sequence[np.ndarray]) -> np.ndarray:
        shape = tuple(F.shape[0] for F in factors)
        transformed = [F @ s.basis for F, s in zip(factors, self.splits, strict=True)]
        out = np.zeros(shape)
        for k, (block, s) in enumerate(self.blocks):
            part = np.ones(())
            for a, p in enumerate(block.parts):
                if p is not None:
                    Ft = transformed[a][:, self._slices[k][a]]
                    vec = (Ft * Ft).sum(axis=1)
                else:
                    vec = np.ones(shape[a])
                part = np.multiply.outer(part, vec)
            rows = np.ones((1, 1))
            for a in block.quotient:
                rows = np.kron(rows, transformed[a][:, self._slices[k][a]])
            Y = rows @ s[1]
            quad = np.einsum("ij,ij->i", Y, Y).reshape([shape[a] for a in block.quotient])
            expand = [shape[a] if a in block.quotient else 1 for a in range(len(shape))]
            out += part * quad.reshape(expand)
        return out

    def trace_kron(self, grams: Sequence[np.ndarray]) -> float:
        transformed = [s.basis.T @ G @ s.basis for G, s in zip(grams, self.splits, strict=True)]
        total = 0.0
        for k, (block, s) in enumerate(self.blocks):
            scale = 1.0
            for a, p in enumerate(block.parts):
                if p is not None:
                    r = self._slices[k][a]
                    scale *= float(np.trace(transformed[a][r, r]))
            if scale == 0.0:
                continue
            G = np.ones((1, 1))
            for a in block.quotient:
                r = self._slices[k][a]
                G = np.kron(G, transformed[a][r, r])
            P = s[1]
            total += scale * float((P * (G @ P)).sum())
        return total

    def diag_v(self) -> np.ndarray:
        out = np.zeros(self.sizes)
        for block, s in self.blocks:
            B = s[0]
            vq = (B * B).sum(axis=0)  # V_b's diagonal over the quotient rows
            part = np.ones(())
            for a, p in enumerate(block.parts):
                split = self.splits[a]
                if p is None:
                    vec = 1.0 / split.sizes[split.labels]
                else:
                    vec = np.where(split.labels == p, 1.0 - 1.0 / split.sizes[p], 0.0)
                part = np.multiply.outer(part, vec)
            # the quotient value of each cell is V_b at the cell's class tuple
            grid = np.ix_(*[self.splits[a].labels for a in block.quotient])
            vq_cells = (
                vq.reshape([self.splits[a].classes for a in block.quotient])[grid]
                if block.quotient
                else vq.reshape(())
            )
            expand = [self.sizes[a] if a in block.quotient else 1 for a in range(len(self.sizes))]
            out += part * np.asarray(vq_cells).reshape(expand)
        return out
