"""The weighted-design strategy matrix, its completion and its robust error evaluation.

An eigen-design strategy is the stack (spec 4.2, 7.2)::

    A = [ diag(lambda) Q ;  rho (I - Q^T Q) ;  diag(d) restricted to d > 0 ]

* ``Q`` (r x n) has orthonormal rows: eigen-queries, a Wavelet/Fourier basis, or a Kronecker
  product of per-attribute bases (implicit);
* ``lambda`` are the row weights (``sqrt(u)`` of Program 1 under L2, ``x`` itself under L1);
* the optional middle block gives every direction outside Q one shared weight ``rho`` (the
  principal-vectors reduction when only the top eigenvectors were computed);
* ``d`` is the diagonal completion: one single-cell query per under-used cell, so that every
  column reaches the sensitivity.

``A^T A = Q^T diag(lambda**2) Q + rho**2 (I - Q^T Q) + diag(d**2)``. The error
``tr[W^T W (A^T A)^+]`` is computed with a conditioned Cholesky factor when ``A^T A`` is safely
positive definite, otherwise through ``eigh`` with a relative cutoff and an explicit check that
the workload has no mass on the dropped directions (never a naive pseudo-inverse, spec
pitfall 6).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import scipy.linalg as sla

from engine.linalg.matrix import Dense, Kron, Matrix
from engine.linalg.pinv import RCOND

#: Completions with ``d_j**2 < COMPLETION_CUTOFF * max_j m_j**2`` are solver noise and dropped.
COMPLETION_CUTOFF = 1e-9
#: Largest n for which ``A^T A`` is formed as a dense n x n array.
DENSE_GRAM_LIMIT = 8192


def completion(norms: np.ndarray) -> np.ndarray:
    """Diagonal completion ``d`` for per-column sensitivities ``norms`` (spec 4.2 step 4).

    Under L2 (``norms`` = column 2-norms) ``d_j = sqrt(max m**2 - m_j**2)``; the caller
    passes L1 column sums and uses ``max m - m_j`` for L1 (see :func:`completion_l1`).
    """
    m2 = np.asarray(norms, float) ** 2
    d2 = np.maximum(m2.max() - m2, 0.0)
    d2[d2 < COMPLETION_CUTOFF * m2.max()] = 0.0
    return np.sqrt(d2)


def completion_l1(sums: np.ndarray) -> np.ndarray:
    """Diagonal completion under L1: ``d_j = max m - m_j`` (spec section 6)."""
    m = np.asarray(sums, float)
    d = np.maximum(m.max() - m, 0.0)
    d[d**2 < COMPLETION_CUTOFF * m.max() ** 2] = 0.0
    return d


class EigenStrategy(Matrix):
    """``[diag(lambda) Q ; rho (I - Q^T Q) ; diag(d)]`` as an implicit matrix (see module doc).

    Args:
        queries: (r x n) array with orthonormal rows, or an implicit Matrix (e.g. a Kron of
            per-attribute orthonormal bases).
        weights: (r,) non-negative row multipliers; rows with weight 0 are not measured.
        rest: shared weight of the complement projector rows (0: no such block).
        completion: (n,) non-negative single-cell weights (None: no completion).
    """

    def __init__(self, queries: np.ndarray | Matrix, weights: np.ndarray, rest: float = 0.0,
                 completion: np.ndarray | None = None) -> None:
        self.queries = queries
        self.weights = np.asarray(weights, dtype=float)
        self.rest = float(rest)
        r, n = queries.shape
        if self.weights.shape != (r,):
            raise ValueError(f"EigenStrategy: need {r} weights, got {self.weights.shape}")
        if self.rest and not isinstance(queries, np.ndarray):
            raise ValueError("EigenStrategy: the complement block needs explicit queries")
        self.n = int(n)
        self.completion = (np.zeros(self.n) if completion is None
                           else np.asarray(completion, dtype=float))
        self.rows = np.flatnonzero(self.weights > 0)
        self.cells = np.flatnonzero(self.completion > 0)

    # ----- the implicit matrix ------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        rest_rows = self.n if self.rest > 0 else 0
        return (self.rows.size + rest_rows + self.cells.size, self.n)

    def _q(self, x: np.ndarray) -> np.ndarray:
        Q = self.queries
        return Q @ x if isinstance(Q, np.ndarray) else Q.matvec(x)

    def _qt(self, y: np.ndarray) -> np.ndarray:
        Q = self.queries
        return Q.T @ y if isinstance(Q, np.ndarray) else Q.rmatvec(y)

    def _lift(self, part: np.ndarray) -> np.ndarray:
        full = np.zeros((self.weights.shape[0],) + part.shape[1:])
        full[self.rows] = part
        return full

    def matvec(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        col = (slice(None),) + (None,) * (x.ndim - 1)
        qx = self._q(x)
        parts = [(self.weights[col] * qx)[self.rows]]
        if self.rest > 0:
            parts.append(self.rest * (x - self._qt(qx)))
        parts.append(self.completion[self.cells][col] * x[self.cells])
        return np.concatenate(parts)

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        col = (slice(None),) + (None,) * (y.ndim - 1)
        k = self.rows.size
        out = self._qt(self._lift(self.weights[self.rows][col] * y[:k]))
        pos = k
        if self.rest > 0:
            z = y[pos:pos + self.n]
            out = out + self.rest * (z - self._qt(self._q(z)))
            pos += self.n
        tail = np.zeros((self.n,) + y.shape[1:])
        tail[self.cells] = self.completion[self.cells][col] * y[pos:]
        return out + tail

    def dense(self) -> np.ndarray:
        self.check_dense()
        Q = self.queries if isinstance(self.queries, np.ndarray) else self.queries.dense()
        blocks = [self.weights[self.rows, None] * Q[self.rows]]
        if self.rest > 0:
            blocks.append(self.rest * (np.eye(self.n) - Q.T @ Q))
        blocks.append(np.eye(self.n)[self.cells] * self.completion[self.cells, None])
        return np.vstack(blocks)

    # ----- closed forms -------------------------------------------------------------------
    def _squared_queries(self, power: int) -> Callable[[np.ndarray], np.ndarray]:
        """``v -> (|Q|**power)^T v`` (column sums of the weighted, powered query block)."""
        Q = self.queries
        if isinstance(Q, np.ndarray):
            P = np.abs(Q) ** power
            return lambda v: P.T @ v
        if isinstance(Q, Kron):
            K = Kron([Dense(np.abs(f.dense()) ** power) for f in Q.factors])
            return K.rmatvec
        if power == 2 and hasattr(Q, "squares_rmatvec"):
            return Q.squares_rmatvec  # a closed form (the sine basis: one FFT)
        P = np.abs(Q.dense()) ** power
        return lambda v: P.T @ v

    def query_column_norms(self, p: int) -> np.ndarray:
        """Per-column L1 (p=1) or squared L2 (p=2) norms of the weighted-query block alone."""
        return self._squared_queries(p)(self.weights**p)

    def column_norms(self, p: int) -> np.ndarray:
        if p == 2:
            sq = self.query_column_norms(2) + self.completion**2
            if self.rest > 0:
                Q = self.queries
                sq = sq + self.rest**2 * np.maximum(1.0 - (Q * Q).sum(axis=0), 0.0)
            return np.sqrt(sq)
        sums = self.query_column_norms(1) + self.completion
        if self.rest > 0:
            sums = sums + self.rest * self._complement_column_sums()
        return sums

    def _complement_column_sums(self) -> np.ndarray:
        """L1 column sums of ``I - Q^T Q``, a block of columns at a time (O(n**2 r))."""
        Q = self.queries
        out = np.empty(self.n)
        step = max(1, min(self.n, 2**24 // self.n))
        for lo in range(0, self.n, step):
            hi = min(self.n, lo + step)
            block = -(Q.T @ Q[:, lo:hi])
            block[np.arange(lo, hi), np.arange(hi - lo)] += 1.0
            out[lo:hi] = np.abs(block).sum(axis=0)
        return out

    def sensitivity(self, p: int) -> float:
        return float(self.column_norms(p).max())

    def fro2(self) -> float:
        total = float((self.weights**2).sum() + (self.completion**2).sum())
        if self.rest > 0:
            total += self.rest**2 * (self.n - self.queries.shape[0])
        return total

    def gram_array(self) -> np.ndarray:
        """``A^T A`` as a dense n x n array (n <= DENSE_GRAM_LIMIT)."""
        if self.n > DENSE_GRAM_LIMIT:
            raise ValueError(f"EigenStrategy: refusing a dense {self.n:,} x {self.n:,} Gram")
        Q = self.queries if isinstance(self.queries, np.ndarray) else self.queries.dense()
        X = (Q.T * self.weights**2) @ Q
        if self.rest > 0:
            X += self.rest**2 * (np.eye(self.n) - Q.T @ Q)
        X[np.diag_indices(self.n)] += self.completion**2
        return (X + X.T) / 2.0

    def gram(self) -> Matrix:
        return Dense(self.gram_array())

    def __repr__(self) -> str:
        return f"EigenStrategy({self.shape[0]}x{self.shape[1]})"


# ----- robust linear algebra on A^T A -------------------------------------------------------
class LazySensitivity(Mapping):
    """``{1: L1, 2: L2}`` sensitivities computed on first access.

    The L1 column sums of a complement block cost O(n**2 r); an (eps, delta) plan only reads
    the L2 entry, so the other is computed only if asked for (e.g. a Laplace comparison).
    """

    def __init__(self, strategy: EigenStrategy) -> None:
        self.strategy = strategy
        self._values: dict[int, float] = {}

    def __getitem__(self, p: int) -> float:
        if p not in (1, 2):
            raise KeyError(p)
        if p not in self._values:
            self._values[p] = self.strategy.sensitivity(p)
        return self._values[p]

    def __iter__(self):
        return iter((1, 2))

    def __len__(self) -> int:
        return 2

    def __repr__(self) -> str:
        return f"LazySensitivity({self._values})"


class NormalSolver:
    """Applies ``(A^T A)^+`` and evaluates ``tr[G (A^T A)^+]`` for an EigenStrategy.

    * square orthonormal queries without completion: ``Q^T diag(1/lambda**2) Q``;
    * square orthonormal queries (explicit, or implicit with fast products), all weighted,
      with a completion on m cells: in the
      queries' basis ``A^T A`` is ``diag(lambda**2)`` plus a rank-m term, inverted by the
      Woodbury identity with an m x m Cholesky factor (O(n m**2), no n x n product); if the
      correction cancels most of the leading term it falls back to the dense route;
    * a complement block: the Woodbury identity around the diagonal ``rho**2 + d**2``;
    * otherwise the dense Gram: a Cholesky factor when it is safely positive definite (its
      diagonal ratio above ``1e2 sqrt(rcond)``), else ``eigh`` with the relative cutoff.
    """

    #: The low-rank completion route is abandoned when its correction exceeds this fraction
    #: of the leading term (cancellation would cost digits).
    CANCELLATION = 0.9

    def __init__(self, strategy: EigenStrategy, rcond: float = RCOND) -> None:
        self.strategy, self.rcond = strategy, rcond
        s = strategy
        self.kind: str
        Q = s.queries
        if (Q.shape[0] == s.n and s.cells.size and not s.rest and np.all(s.weights > 0)):
            self.kind = "completion"
            self.lam2 = s.weights**2
            if isinstance(Q, np.ndarray):
                Qc = Q[:, s.cells]
            else:  # an implicit square basis: its completed columns by m products
                picks = np.zeros((s.n, s.cells.size))
                picks[s.cells, np.arange(s.cells.size)] = 1.0
                Qc = Q.matvec(picks)
            self.Wc = Qc / self.lam2[:, None]  # Lambda^-2 Q_c (n x m)
            S = Qc.T @ self.Wc
            S[np.diag_indices_from(S)] += 1.0 / s.completion[s.cells] ** 2
            self.S_chol = sla.cho_factor(S, lower=True, check_finite=False)
        elif not s.cells.size and not s.rest:
            # A^T A = Q^T diag(lambda**2) Q with orthonormal rows: its pseudo-inverse is known
            self.kind = "orthonormal"
            if not isinstance(s.queries, np.ndarray) and s.queries.shape[0] != s.n:
                raise ValueError("NormalSolver: implicit queries must be square")
            lam2 = s.weights**2
            scale = max(float(lam2.max()), 1e-300)
            self.inv = np.where(lam2 > rcond * scale, 1.0 / np.where(lam2 > 0, lam2, 1.0), 0.0)
        elif s.rest > 0:
            self.kind = "woodbury"
            Q = s.queries
            self.delta = s.rest**2 + s.completion**2
            self.core = s.weights**2 - s.rest**2
            M = (Q / self.delta) @ Q.T
            self.S = np.eye(Q.shape[0]) + self.core[:, None] * M
            self.S_lu = sla.lu_factor(self.S)
        else:
            self._dense()

    def _dense(self) -> None:
        """Factor the dense Gram: Cholesky when safely positive definite, else eigh."""
        s, rcond = self.strategy, self.rcond
        X = s.gram_array()
        self.chol = None
        try:
            c, low = sla.cho_factor(X, lower=True, check_finite=False)
            diag = np.abs(np.diag(c))
            if diag.min() > np.sqrt(rcond) * 1e2 * diag.max():
                self.chol = (c, low)
        except np.linalg.LinAlgError:
            pass
        if self.chol is not None:
            self.kind = "cholesky"
        else:
            self.kind = "eigh"
            lam, U = np.linalg.eigh(X)
            keep = lam > rcond * max(float(lam.max()), 1e-300)
            self.lam, self.U, self.keep = lam[keep], U[:, keep], keep
            self.U_null = U[:, ~keep]

    def apply(self, v: np.ndarray) -> np.ndarray:
        """``(A^T A)^+ v`` for a vector or a batch of columns."""
        s = self.strategy
        v = np.asarray(v, dtype=float)
        col = (slice(None),) + (None,) * (v.ndim - 1)
        if self.kind == "orthonormal":
            return s._qt(self.inv[col] * s._q(v))
        if self.kind == "completion":
            y = s._q(v)
            z = y / self.lam2[col] - self.Wc @ sla.cho_solve(self.S_chol, self.Wc.T @ y,
                                                              check_finite=False)
            return s._qt(z)
        if self.kind == "woodbury":
            Q = s.queries
            w = v / self.delta[col]
            z = sla.lu_solve(self.S_lu, self.core[col] * (Q @ w))
            return w - (Q.T @ z) / self.delta[col]
        if self.kind == "cholesky":
            return sla.cho_solve(self.chol, v, check_finite=False)
        return self.U @ ((self.U.T @ v) / self.lam[col])

    def trace(self, G: np.ndarray | Matrix | None = None, F: np.ndarray | None = None,
              support_rtol: float = 1e-8, diagonal: np.ndarray | None = None) -> float:
        """``tr[G (A^T A)^+]``; inf when A does not support G.

        Args:
            G: the workload Gram (n x n; an implicit GramOperator for a complement block), or
            F: a factor with ``G = F F^T`` (n x r), or
            diagonal: ``c`` with ``G = Q^T diag(c) Q`` for the strategy's own square queries
                (eigen-query designs: the eigenvalues).
            support_rtol: relative mass of G allowed outside the range of ``A^T A``.

        Raises:
            ValueError: when none of G, F, diagonal is given.
        """
        if G is None and F is None and diagonal is None:
            raise ValueError("NormalSolver.trace: give G, a factor F or the diagonal")
        if self.kind == "completion":
            value = self._completion_trace(G, F, diagonal)
            if value is not None:
                return value
            self._dense()  # too much cancellation: take the dense route instead
        if diagonal is not None and G is None and F is None:
            F = self.strategy.queries.T * np.sqrt(np.maximum(diagonal, 0.0))
        if self.kind == "cholesky":
            c, _ = self.chol
            L = np.tril(c)
            if F is not None:
                Y = sla.solve_triangular(L, F, lower=True, check_finite=False)
                return float((Y * Y).sum())
            return float(np.trace(sla.cho_solve(self.chol, G, check_finite=False)))
        if self.kind == "eigh":
            total = float((F * F).sum()) if F is not None else float(np.trace(G))
            if F is not None:
                Z = self.U.T @ F
                kept = (Z * Z).sum(axis=1)
                Zn = self.U_null.T @ F
                lost = float((Zn * Zn).sum())
            else:
                kept = np.einsum("ij,ij->j", self.U, G @ self.U)
                lost = float(np.einsum("ij,ij->", self.U_null, G @ self.U_null))
            if lost > support_rtol * max(total, 1e-300):
                return math.inf
            return float((kept / self.lam).sum())
        if self.kind == "orthonormal":
            Q = s_queries = self.strategy.queries
            if not isinstance(s_queries, np.ndarray):
                raise ValueError("NormalSolver.trace: implicit strategies use Program 1's "
                                 "value")
            if F is not None:
                Z = Q @ F
                mass, total = (Z * Z).sum(axis=1), float((F * F).sum())
            else:
                mass, total = np.einsum("ij,ij->i", Q @ G, Q), float(np.trace(G))
            # G must live in the span of the measured rows (orthonormal, so a norm check)
            unsupported = total - float(mass[self.inv > 0].sum())
            if unsupported > support_rtol * max(total, 1e-300):
                return math.inf
            return float((mass * self.inv).sum())
        if G is None:
            G = F @ F.T
        # woodbury: tr[G X^-1] = tr[G D^-1] - tr[S^-1 C Q D^-1 G D^-1 Q^T]; G may be an
        # implicit operator with fast products and a diagonal (GramOperator)
        s = self.strategy
        Q = s.queries
        QD = Q / self.delta
        if isinstance(G, np.ndarray):
            Y, diag = QD @ G @ QD.T, np.diag(G)
        else:
            Y, diag = QD @ G.matvec(QD.T), G.diagonal()
        first = float((diag / self.delta).sum())
        second = float(np.trace(sla.lu_solve(self.S_lu, self.core[:, None] * Y)))
        return first - second

    def _completion_trace(self, G: np.ndarray | None, F: np.ndarray | None,
                          diagonal: np.ndarray | None) -> float | None:
        """``tr[M^-1 Q G Q^T]`` with ``M = diag(lambda**2) + Q_c D_c**2 Q_c^T`` (Woodbury).

        Returns None when the correction cancels more than ``CANCELLATION`` of the leading
        term.
        """
        Q = self.strategy.queries
        if diagonal is not None:
            root = np.sqrt(np.maximum(diagonal, 0.0))
            lead = float((diagonal / self.lam2).sum())
            Z = self.Wc.T * root  # (m x n): Q_c^T Lambda^-2 diag(sqrt c)
        elif F is not None:
            Y = Q @ F
            lead = float(((Y * Y).sum(axis=1) / self.lam2).sum())
            Z = self.Wc.T @ Y
        else:
            QGQ = Q @ G @ Q.T
            lead = float((np.diag(QGQ) / self.lam2).sum())
            K = self.Wc.T @ QGQ @ self.Wc
            corr = float(np.trace(sla.cho_solve(self.S_chol, K, check_finite=False)))
            return lead - corr if corr <= self.CANCELLATION * lead else None
        L = np.tril(self.S_chol[0])
        Y2 = sla.solve_triangular(L, Z, lower=True, check_finite=False)
        corr = float((Y2 * Y2).sum())
        return lead - corr if corr <= self.CANCELLATION * lead else None
