"""Workload error of released marginals: mean L1, mean L2 and max L1, raw and per record.

Definitions (spec aim_grem.md 6.6): over the workload marginals ``W``,
``mean L1 = (1/|W|) sum_gamma ||mu_gamma - muhat_gamma||_1``,
``mean L2 = (1/|W|) sum_gamma ||mu_gamma - muhat_gamma||_2`` and
``max L1 = max_gamma ||mu_gamma - muhat_gamma||_1``, in counts. The paper does not say how it
normalises; its magnitudes fit division by the record count N, so both are reported, labelled.
These numbers compare a release with the TRUE marginals: they are an evaluation, not a private
output.

Example:
    >>> import numpy as np
    >>> e = workload_errors({(0,): np.array([3.0, 1.0])}, {(0,): np.array([2, 2])}, records=4)
    >>> e.mean_l1, e.per_record("mean_l1")
    (2.0, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from engine.linalg.residuals import AttrSet

#: metric key -> display label (raw counts).
LABELS = {
    "mean_l1": "mean L1 (counts)",
    "mean_l2": "mean L2 (counts)",
    "max_l1": "max L1 (counts)",
}
#: metric key -> display label when divided by the record count.
PER_RECORD_LABELS = {
    "mean_l1": "mean L1 / N",
    "mean_l2": "mean L2 / N",
    "max_l1": "max L1 / N",
}

Truth = Mapping[AttrSet, np.ndarray] | Callable[[AttrSet], np.ndarray]


@dataclass(frozen=True)
class WorkloadErrors:
    """Errors of a set of marginal estimates against the true marginals.

    Attributes:
        mean_l1: mean over workload marginals of the L1 error (counts).
        mean_l2: mean over workload marginals of the L2 error (counts).
        max_l1: largest L1 error of one workload marginal (counts).
        records: the true record count N used for the per-record versions.
        marginals: number of workload marginals averaged over.
    """

    mean_l1: float
    mean_l2: float
    max_l1: float
    records: int
    marginals: int

    def per_record(self, key: str) -> float:
        """A metric divided by the record count (``key`` in :data:`LABELS`)."""
        if key not in LABELS:
            raise KeyError(f"metric: unknown {key!r}; allowed: {', '.join(LABELS)}")
        value = float(getattr(self, key))
        return value / self.records if self.records else math.nan

    def as_dict(self) -> dict[str, float]:
        """Labelled raw and per-record values, e.g. ``{"mean L1 (counts)": ..., "mean L1 / N":
        ...}``."""
        out = {label: float(getattr(self, key)) for key, label in LABELS.items()}
        out.update({label: self.per_record(key) for key, label in PER_RECORD_LABELS.items()})
        return out

    def as_json(self) -> dict[str, float]:
        """Unlabelled raw values under the CLI's keys (``mean_l1``, ``mean_l2``, ``max_l1``)."""
        return {key: float(getattr(self, key)) for key in LABELS}


def marginal_errors(estimate: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """``(L1, L2)`` error of one marginal estimate (counts)."""
    diff = np.asarray(estimate, dtype=float) - np.asarray(truth, dtype=float)
    return float(np.abs(diff).sum()), float(np.sqrt(np.square(diff).sum()))


def workload_errors(estimates: Mapping[AttrSet, np.ndarray], truth: Truth,
                    records: int | None = None) -> WorkloadErrors:
    """Mean L1, mean L2 and max L1 error of ``estimates`` over their attribute sets.

    Args:
        estimates: attribute set -> estimated marginal (counts), one per workload marginal.
        truth: attribute set -> true marginal, as a mapping or a function (e.g. counting).
        records: the true record count N; read off the first true marginal when omitted.

    Returns:
        The errors, raw (counts) with per-record versions.
    """
    if not estimates:
        raise ValueError("workload_errors: no estimates")
    get = truth if callable(truth) else truth.__getitem__
    l1s, l2s = [], []
    total = None
    for gamma, est in estimates.items():
        true = np.asarray(get(gamma))
        if total is None:
            total = int(round(float(true.sum())))
        l1, l2 = marginal_errors(est, true)
        l1s.append(l1)
        l2s.append(l2)
    n = int(records) if records is not None else int(total or 0)
    return WorkloadErrors(mean_l1=float(np.mean(l1s)), mean_l2=float(np.mean(l2s)),
                          max_l1=float(np.max(l1s)), records=n, marginals=len(l1s))
