"""The outcome of a data-dependent marginal release: estimates, per-round log, budget ledger.

:class:`AdaptiveResult` is what AIM+GReM (and, for comparison, the batch ResidualPlanner and
AIM+PGM runs) return. Estimates are the mechanism's raw output (counts, possibly negative and
fractional, as in the paper). :meth:`AdaptiveResult.post_processed` offers an explicitly
labelled clean-up for display that is NOT part of the paper's method.

Example:
    >>> import numpy as np
    >>> from engine.domain import Domain
    >>> r = AdaptiveResult("demo", Domain.from_sizes([2]), ((0,),), {(0,): np.array([-1.0, 5.0])},
    ...                    rho=0.5, ledger=(("measure", 0.5),), seconds=0.0, total=4.0)
    >>> r.post_processed("clip+rescale")[(0,)].tolist()
    [0.0, 4.0]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from engine.domain import Domain
from engine.linalg.residuals import AttrSet
from engine.mechanisms.aim_grem.metrics import Truth, WorkloadErrors, workload_errors
from engine.privacy import Privacy

#: post-processing name -> display label (only "raw" is the paper's output).
POST_PROCESSING = {
    "raw": "raw estimates (the mechanism's output; may be negative)",
    "clip": "clipped at 0 (post-processing, not part of the paper's method)",
    "clip+rescale": "clipped at 0 and rescaled to the estimated total (post-processing, "
                    "not part of the paper's method)",
}


@dataclass(frozen=True)
class RoundRecord:
    """One round of an adaptive run.

    Attributes:
        round: 1-based round number after initialisation.
        marginal: attribute set selected (sorted axis tuple).
        epsilon: exponential-mechanism parameter of the round.
        sigma: marginal-equivalent noise std of the round (counts).
        rho_round: zCDP charged for the round (selection + measurement).
        rho_used: cumulative zCDP charged after the round (initialisation included).
        measured: residuals measured.
        skipped: residuals of the marginal skipped by CRP (still charged).
        change_l1: L1 change of the selected marginal's estimate (private; drives annealing).
        annealed: True when the next round's budget was doubled.
        final: True for the round that spends the remaining budget.
        expected_l1: model-based expected L1 error of the selected marginal after the round,
            ``sqrt(2/pi) n_gamma sqrt(sum v_tau / lambda_tau)`` (private: no true data).
        workload_error: mean L1 error over the workload marginals after the round against the
            TRUE data (evaluation only, counts; NaN when not tracked).
        seconds: wall-clock since the run started.
    """

    round: int
    marginal: AttrSet
    epsilon: float
    sigma: float
    rho_round: float
    rho_used: float
    measured: tuple[AttrSet, ...]
    skipped: tuple[AttrSet, ...]
    change_l1: float
    annealed: bool
    final: bool
    expected_l1: float
    workload_error: float
    seconds: float


@dataclass(frozen=True, eq=False)
class AdaptiveResult:
    """Marginal estimates released by a mechanism run on data.

    Attributes:
        mechanism: name of the mechanism (e.g. ``aim-grem``).
        domain: the public domain the marginals are over.
        sets: the workload's attribute sets (sorted axis tuples).
        estimates: attribute set -> raw estimated marginal (counts, may be negative).
        rho: the zCDP budget the run was given.
        ledger: every charge ``(what, rho)`` in order; they sum to ``rho``.
        seconds: wall-clock of the whole run.
        rounds: the per-round log (empty for batch mechanisms).
        total: the release's own estimate of the record count (for rescaling).
        privacy: the privacy level the user asked for, when given as one.
        details: mechanism-specific values (initial noise, K, allocations, ...).
    """

    mechanism: str
    domain: Domain
    sets: tuple[AttrSet, ...]
    estimates: Mapping[AttrSet, np.ndarray]
    rho: float
    ledger: tuple[tuple[str, float], ...]
    seconds: float
    rounds: tuple[RoundRecord, ...] = ()
    total: float = math.nan
    privacy: Privacy | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rho_spent(self) -> float:
        """Sum of every charge in the ledger (zCDP), summed exactly (``math.fsum``)."""
        return math.fsum(cost for _, cost in self.ledger)

    def names(self, gamma: AttrSet) -> tuple[str, ...]:
        """Attribute names of an attribute set."""
        return tuple(self.domain.names[k] for k in gamma)

    def label(self, gamma: AttrSet) -> str:
        """Display name of a marginal, e.g. ``age x sex``; ``total`` for the empty set."""
        return " x ".join(self.names(gamma)) or "total"

    def post_processed(self, kind: str = "raw") -> dict[AttrSet, np.ndarray]:
        """Estimates after an optional, labelled post-processing (see :data:`POST_PROCESSING`).

        ``clip`` sets negative counts to 0; ``clip+rescale`` then scales every marginal to the
        release's estimated total (post-processing of private output: no privacy cost).
        """
        if kind not in POST_PROCESSING:
            raise ValueError(f"post_processing: unknown {kind!r}; allowed: "
                             f"{', '.join(POST_PROCESSING)}")
        if kind == "raw":
            return {g: np.array(m, dtype=float) for g, m in self.estimates.items()}
        out = {}
        for g, m in self.estimates.items():
            clipped = np.clip(np.asarray(m, dtype=float), 0.0, None)
            if kind == "clip+rescale":
                mass = clipped.sum()
                target = max(float(self.total), 0.0) if math.isfinite(self.total) else mass
                clipped = (clipped * (target / mass) if mass > 0
                           else np.full(clipped.shape, target / max(clipped.size, 1)))
            out[g] = clipped
        return out

    def errors(self, truth: Truth, records: int | None = None,
               post_processing: str = "raw") -> WorkloadErrors:
        """Workload errors against the TRUE marginals (evaluation, not a private output)."""
        return workload_errors(self.post_processed(post_processing), truth, records)

    def round_table(self) -> list[dict[str, Any]]:
        """The per-round log as plain rows (marginals by name) for tables and CSV."""
        rows = []
        for r in self.rounds:
            row = asdict(r)
            row["marginal"] = self.label(r.marginal)
            row["measured"] = len(r.measured)
            row["skipped"] = len(r.skipped)
            rows.append(row)
        return rows

    def estimates_frame(self, post_processing: str = "raw") -> pd.DataFrame:
        """Every estimated cell in long format: ``marginal``, one code column per attribute
        (empty where the attribute is not in the marginal) and ``estimate`` (counts)."""
        frames = []
        for g, m in self.post_processed(post_processing).items():
            columns: dict[str, Any] = {"marginal": self.label(g)}
            codes = np.unravel_index(np.arange(m.size), m.shape) if m.ndim else ()
            for name, code in zip(self.names(g), codes, strict=True):
                columns[name] = code
            columns["estimate"] = m.reshape(-1)
            frames.append(pd.DataFrame(columns, index=pd.RangeIndex(m.size)))
        out = pd.concat(frames, ignore_index=True)
        ordered = ["marginal"] + [n for n in self.domain.names if n in out.columns]
        return out[ordered + ["estimate"]].astype({n: "Int64" for n in ordered[1:]})
