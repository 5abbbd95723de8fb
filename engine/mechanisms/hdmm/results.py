"""What HDMM's optimisers return: OPT_0's :class:`Factor` (one strategy for one explicit Gram),
OPT_kron's :class:`KronResult`, OPT_+'s :class:`UnionResult` and OPT_M's
:class:`MarginalsResult`.

The operators build these and :mod:`~engine.mechanisms.hdmm.display` maps them to views; both
import this module, which imports neither.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from engine.linalg.matrix import (
    Matrix,
)
from engine.linalg.pinv import supports


@dataclass(frozen=True, eq=False)
class Factor:
    """A strategy chosen for one explicit Gram, with what the error formulas need.

    Attributes:
        kind: ``identity``, ``total``, ``p-identity``, ``id-total``, ``hb-tree`` or
            ``gaussian``.
        matrix: the strategy A (columns = cells).
        loss: ``||A||_K**2 tr[(A^T A)^+ V]`` on the Gram it was chosen for.
        norm: K (1 Laplace, 2 Gaussian).
        info: the optimiser's results (restart losses, duality gap, candidates...).
    """

    kind: str
    matrix: Matrix
    loss: float
    norm: int
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Number of cells."""
        return self.matrix.shape[1]

    @cached_property
    def gram_matrix(self) -> Matrix:
        """``A^T A`` with its structure (its ``pinv()`` takes the cheapest exact route)."""
        return self.matrix.gram()

    @cached_property
    def gram(self) -> np.ndarray:
        """``A^T A``."""
        return self.gram_matrix.dense()

    @cached_property
    def gram_pinv(self) -> np.ndarray:
        """``(A^T A)^+``."""
        return self.gram_matrix.pinv().dense()

    @cached_property
    def pinv(self) -> Matrix:
        """``A^+`` (implicit for p-Identity, explicit for the other families)."""
        return self.matrix.pinv()

    @property
    def triangular(self) -> bool:
        """True for the square upper-triangular Cholesky strategy."""
        return self.info.get("factorization") == "cholesky"

    @property
    def full_rank(self) -> bool:
        """True when A has full column rank (then it supports every query)."""
        if self.kind == "total":
            return self.n == 1
        if self.kind == "gaussian":
            return self.triangular
        return True

    @cached_property
    def sensitivity(self) -> dict[int, float]:
        """``{1: L1, 2: L2}`` sensitivities (largest column norms)."""
        return {1: self.matrix.sensitivity(1), 2: self.matrix.sensitivity(2)}

    def trace(self, V: np.ndarray) -> float:
        """``tr[(A^T A)^+ V]``; inf when A does not support V."""
        if not self.full_rank and not supports(V, self.gram):
            return math.inf
        return float((self.gram_pinv * V).sum())

    def error(self, V: np.ndarray, norm: int | None = None) -> float:
        """``||A||_K**2 tr[(A^T A)^+ V]`` in norm K (default: the one it was chosen for)."""
        k = self.norm if norm is None else norm
        return self.sensitivity[k] ** 2 * self.trace(V)

    def pinv_matrix(self) -> np.ndarray:
        """The explicit pseudo-inverse ``A^+`` (n x rows) for Kronecker reconstruction."""
        return self.pinv.dense()

    def pinv_apply(self, y: np.ndarray) -> np.ndarray:
        """Least squares ``A^+ y`` (O(p n) for p-Identity)."""
        return self.pinv.matvec(np.asarray(y, dtype=float))


@dataclass(frozen=True, eq=False)
class KronResult:
    """What OPT_kron found.

    Attributes:
        factors: one :class:`Factor` per attribute.
        traces: ``tr[(A_i^T A_i)^+ V_ij]`` per product j and attribute i (k x d).
        loss: unit-noise error ``||A||**2 tr[(A^T A)^+ W^T W]`` of the Kronecker strategy.
        history: the error after the start and after every sweep.
    """

    factors: tuple[Factor, ...]
    traces: np.ndarray
    loss: float
    history: tuple[float, ...]


@dataclass(frozen=True, eq=False)
class UnionResult:
    """What OPT_+ found: per-group Kronecker results, weights and the union's error."""

    groups: tuple[tuple[int, ...], ...]
    blocks: tuple[KronResult, ...]
    weights: np.ndarray
    block_errors: np.ndarray
    loss: float


@dataclass(frozen=True, eq=False)
class MarginalsResult:
    """What OPT_M found: normalised weights, their unit error and the optimiser's record
    (closed-form verdict, restart losses)."""

    theta: np.ndarray
    loss: float
    info: dict[str, Any]
