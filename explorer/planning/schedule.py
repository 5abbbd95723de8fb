"""What planning a mechanism is expected to cost, and the order the mechanisms plan in.

The cost model (:meth:`engine.mechanisms.Mechanism.estimate`) counts a mechanism's planning
operations and peak memory before anything is planned; :data:`OPERATIONS_PER_SECOND` turns the
count into seconds. Mechanisms plan cheapest first; those estimated over
:data:`AUTO_START_SECONDS` wait until the user asks for them ("Plan anyway").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

from engine import Privacy, Workload, format_bytes, get, mechanism_class

#: Operations of ``Cost.plan_operations`` planned per second, to turn the cost model's count
#: into a time. A rough constant, measured once on the 2-core development machine by planning
#: mechanisms one at a time. The model is loose: on the large estimates that decide what is
#: held back it runs 4e8 to 3.5e10 per second (eigen-design on SF1: 1.4e10 operations in
#: 18-36 s; hdmm on SF1: 2.8e10 in 2-3 s; hdmm-opt0 on 1,400 cells: 2.7e11 in 9.4 s; hdmm-kron
#: on SF1: 1.4e10 in 0.4 s), on small ones down to 2e7 (eigen-design on CPS: 9e6 in 0.46 s).
#: Times derived from it are shown as estimates, never as promises.
OPERATIONS_PER_SECOND = 1e10
#: Mechanisms estimated to plan longer than this (seconds) start only on the user's request.
AUTO_START_SECONDS = 60.0


def mechanism_title(name: str) -> str:
    """The display title of a registered mechanism (its name when it has none)."""
    try:
        return mechanism_class(name).title or name
    except Exception:  # an unknown or broken registration must not break a page
        return name


def is_data_dependent(name: str) -> bool:
    """True for mechanisms that need the data to choose what to measure."""
    try:
        return bool(mechanism_class(name).data_dependent)
    except Exception:  # an unknown or broken registration counts as data-independent
        return False


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What planning one mechanism on a workload is expected to cost, before it starts.

    ``operations`` and ``bytes`` are the cost model's planning work and peak memory
    (:meth:`engine.mechanisms.Mechanism.estimate`); ``applicable`` is False when the mechanism
    refuses the workload at once (its row is then ready immediately, whatever the model says).
    """

    mechanism: str
    operations: float
    bytes: float
    applicable: bool = True

    @property
    def seconds(self) -> float:
        """Estimated planning time in seconds (0 when refused at once; inf when unknown)."""
        if not self.applicable:
            return 0.0
        return (
            self.operations / OPERATIONS_PER_SECOND if math.isfinite(self.operations) else math.inf
        )

    @property
    def starts_automatically(self) -> bool:
        """True unless the estimated time exceeds :data:`AUTO_START_SECONDS`."""
        return self.seconds <= AUTO_START_SECONDS

    def describe(self) -> str:
        """``~3e9 operations, 120 MiB, about 1 min (estimate)``."""
        if not self.applicable:
            return "does not apply: ready at once"
        if not math.isfinite(self.operations):
            return "no estimate"
        return (
            f"~{_scientific(self.operations)} operations, {format_bytes(self.bytes)}, "
            f"{duration_text(self.seconds)} (estimate)"
        )


def _scientific(value: float) -> str:
    """``3e9`` for 3.1e9: one significant digit, no plus sign or leading zeros."""
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def duration_text(seconds: float) -> str:
    """``under 1 s``, ``about 12 s``, ``about 4 min``, ``about 3 h``, ``about 2e+03 days``."""
    if seconds < 1.0:
        return "under 1 s"
    if seconds < 90.0:
        return f"about {seconds:.0f} s"
    if seconds < 5400.0:
        return f"about {seconds / 60.0:.0f} min"
    if seconds < 86400.0 * 2:
        return f"about {seconds / 3600.0:.0f} h"
    return f"about {seconds / 86400.0:.2g} days"


def estimate_mechanism(name: str, workload: Workload, privacy: Privacy) -> Estimate:
    """The planning cost of ``name`` on ``workload`` from the cost model (nothing is planned).

    Data-dependent mechanisms and mechanisms whose ``check`` refuses the workload are not
    applicable (they finish at once); an estimate that raises is unknown (infinite).
    """
    try:
        mechanism = get(name)
        if mechanism.data_dependent:
            return Estimate(name, 0.0, 0.0, applicable=False)
        mechanism.check(workload, privacy)
    except Exception:  # NotApplicable, a size guard, a broken registration: refused at once
        return Estimate(name, 0.0, 0.0, applicable=False)
    try:
        cost = mechanism.estimate(workload, privacy)
    except Exception:  # no model for this workload: unknown, planned last
        return Estimate(name, math.inf, math.inf)
    return Estimate(name, float(cost.plan_operations), float(cost.plan_bytes))


def plan_order(estimates: Iterable[Estimate]) -> list[Estimate]:
    """Cheapest first (refused ones at once, unknown ones last); ties keep their order."""
    return sorted(estimates, key=lambda e: e.seconds)


def schedule(
    names: Iterable[str], workload: Workload, privacy: Privacy, allowed: Iterable[str] = ()
) -> tuple[list[Estimate], list[Estimate]]:
    """Split ``names`` into those to plan now, cheapest first, and those held back.

    A mechanism is held back when its estimate exceeds :data:`AUTO_START_SECONDS` and it is
    not among ``allowed`` (the ones the user asked to plan anyway).
    """
    allowed = set(allowed)
    ordered = plan_order(estimate_mechanism(n, workload, privacy) for n in names)
    start = [e for e in ordered if e.starts_automatically or e.mechanism in allowed]
    held = [e for e in ordered if not e.starts_automatically and e.mechanism not in allowed]
    return start, held
