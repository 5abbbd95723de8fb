"""The SVD lower bound on the error of any matrix mechanism (HDMM Def. 11, Thm. 5, Thm. 12).

``SVDB(W) = (tr (W^T W)^(1/2))**2 / n`` bounds ``||A||**2 tr[(A^T A)^+ W^T W]`` from below
for every strategy A that supports W, in both the L2 and (more loosely) the L1 norm. As an RMSE
at a privacy level: ``sigma * sqrt(SVDB / m)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.error import EXPLICIT_LIMIT
from engine.linalg.marginals import is_marginal_like, marginal_svd_bound, marginal_weights
from engine.linalg.pinv import psd_sqrt_trace
from engine.privacy import Privacy
from engine.workloads.workload import Workload

#: Largest single attribute whose Gram is eigendecomposed for a Kronecker bound.
FACTOR_LIMIT = 16384


@dataclass(frozen=True)
class Bound:
    """An SVD bound: ``value`` (unit-noise, in squared-sensitivity units) or why there is none."""

    value: float | None
    method: str
    reason: str = ""

    def rmse(self, workload: Workload, privacy: Privacy) -> float | None:
        """The bound as an RMSE at ``privacy`` (None when not computable)."""
        if self.value is None:
            return None
        return privacy.sigma() * math.sqrt(self.value / workload.num_queries)


def svd_bound_explicit(V: np.ndarray) -> float:
    """``(tr V^(1/2))**2 / n`` for an explicit n x n Gram V."""
    return psd_sqrt_trace(V) ** 2 / V.shape[0]


def svd_bound(workload: Workload) -> Bound:
    """The SVD bound of a workload, using its structure where it has one.

    * marginal-like workloads (every factor is identity/total-like): closed form (Thm. 12,
      corrected multiplicities);
    * a single Kronecker product: the product of per-attribute bounds (Thm. 5);
    * any workload on at most ``EXPLICIT_LIMIT`` cells: eigenvalues of the explicit Gram;
    * otherwise: no bound (``value=None``) with the reason.
    """
    domain = workload.domain
    if workload.is_product_union:
        grams = workload.factor_grams()
        if all(is_marginal_like(V) for _, vs in grams for V in vs):
            w = marginal_weights(grams)
            return Bound(marginal_svd_bound(w, domain.shape), "marginals")
        if len(grams) == 1:
            weight, vs = grams[0]
            if max(domain.shape) <= FACTOR_LIMIT:
                value = weight**2
                for V in vs:
                    value *= svd_bound_explicit(V)
                return Bound(value, "kronecker")
    if domain.size <= EXPLICIT_LIMIT:
        return Bound(svd_bound_explicit(workload.gram().dense()), "explicit")
    return Bound(None, "none", f"no closed form for this union of {len(workload.terms)} terms "
                               f"and the domain ({domain.size:,} cells) is too large for an "
                               f"explicit eigendecomposition (limit {EXPLICIT_LIMIT:,})")
