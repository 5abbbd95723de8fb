"""What a plan will cost before anything is allocated, and the memory budget that refuses it.

A :class:`Cost` is an estimate, from the workload's implicit structure alone (attribute sizes,
Kronecker factors, marginal sizes, explicit groups), of the peak memory in bytes and a rough
count of floating-point operations of two phases: *planning* (``Mechanism.plan``) and *running*
(``Plan.measure`` + ``Plan.reconstruct`` on data). Each mechanism class estimates its own cost
(``Mechanism.estimate``); the helpers here size the common pieces. Sizes are floats, so a
domain of 1e64 cells costs O(number of attributes) to estimate and never overflows.

The budget (:func:`memory_limit`) is, in order: :func:`set_memory_limit` (the CLI's
``--memory-limit``), the ``DPWB_MEMORY_LIMIT`` environment variable (e.g. ``12GB``), or
:data:`AVAILABLE_FRACTION` of the machine's available memory. :func:`require` raises
:class:`MemoryBudgetError` (a :class:`~engine.errors.SpecError`: one line, CLI exit 2; a
"not applicable" row in a comparison) when an estimate exceeds it.

Example:
    >>> c = Cost(plan_bytes=8e18, plan_what="a dense 1e+09 x 1e+09 Gram")
    >>> try:
    ...     require(c, "hdmm-opt0", limit=12 * 2**30)
    ... except MemoryBudgetError as exc:
    ...     print(exc)
    hdmm-opt0: needs a dense 1e+09 x 1e+09 Gram (8e+18 bytes); the limit is 12 GiB
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from engine.errors import SpecError
from engine.linalg.matrix import Identity, Matrix, Ones
from engine.workloads.workload import Workload

#: Share of the machine's available memory one plan may use when no limit is set.
AVAILABLE_FRACTION = 0.5
#: Environment variable holding a memory limit such as ``12GB`` or ``500MiB``.
LIMIT_ENV = "DPWB_MEMORY_LIMIT"
#: Bytes of one float64.
FLOAT = 8.0
#: Python objects of any plan or run (the plan, its views, small arrays), measured at 40 to
#: 300 KB with tracemalloc on 16-cell plans (benchmarks/guards.py).
OVERHEAD = 2.0**16

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1e3,
    "kb": 1e3,
    "m": 1e6,
    "mb": 1e6,
    "g": 1e9,
    "gb": 1e9,
    "t": 1e12,
    "tb": 1e12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_limit_override: float | None = None


class MemoryBudgetError(SpecError):
    """A plan or run whose estimated memory exceeds the budget (one line with both)."""


@dataclass(frozen=True)
class Cost:
    """Estimated peak memory (bytes) and work (floating-point operations) of a plan and a run.

    ``*_what`` names the dominant allocation of the phase, for the refusal message.
    """

    plan_bytes: float = 0.0
    run_bytes: float = 0.0
    plan_operations: float = 0.0
    run_operations: float = 0.0
    plan_what: str = "its working arrays"
    run_what: str = "its working arrays"

    @property
    def peak_bytes(self) -> float:
        """The larger of the two phases' peak memory, in bytes."""
        return max(self.plan_bytes, self.run_bytes)

    def describe(self) -> str:
        """``plan 1.2 MB / 3e+06 ops; run 80 MB / 1e+07 ops``."""
        return (
            f"plan {format_bytes(self.plan_bytes)} / {self.plan_operations:.1g} ops; "
            f"run {format_bytes(self.run_bytes)} / {self.run_operations:.1g} ops"
        )

    def as_json(self) -> dict[str, float]:
        """The four numbers, for ``validate --json`` and the explorer."""
        return {
            "plan_bytes": self.plan_bytes,
            "run_bytes": self.run_bytes,
            "plan_operations": self.plan_operations,
            "run_operations": self.run_operations,
        }


def parse_size(text: str | float | int, where: str = "--memory-limit") -> float:
    """Bytes of ``12GB``, ``512 MiB``, ``1e9`` (a bare number is bytes); SpecError if bad."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value, unit = float(text), ""
    else:
        match = re.fullmatch(r"\s*([0-9.]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
        if match is None:
            raise SpecError(f"{where}: expected a size such as 12GB or 500MiB, got {text!r}")
        try:
            value = float(match.group(1))
        except ValueError:
            raise SpecError(f"{where}: expected a size such as 12GB, got {text!r}") from None
        unit = match.group(2).lower()
    if unit not in _UNITS:
        raise SpecError(
            f"{where}: unknown unit {unit!r}; allowed: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"
        )
    size = value * _UNITS[unit]
    if not math.isfinite(size) or size <= 0:
        raise SpecError(f"{where}: must be a positive finite size, got {text!r}")
    return size


def set_memory_limit(limit: float | str | None) -> None:
    """Fix the budget for this process (bytes or ``12GB``); None restores the default."""
    global _limit_override
    _limit_override = None if limit is None else parse_size(limit)


def available_memory() -> float:
    """Bytes of memory available to new allocations (psutil, /proc/meminfo, or 4 GiB)."""
    try:
        import psutil

        return float(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    return 4.0 * 2**30


def memory_limit() -> float:
    """The budget in bytes (see the module docstring for where it comes from)."""
    if _limit_override is not None:
        return _limit_override
    env = os.environ.get(LIMIT_ENV)
    if env:
        return parse_size(env, LIMIT_ENV)
    return AVAILABLE_FRACTION * available_memory()


def format_bytes(size: float) -> str:
    """``12 GiB``, ``3.5 MiB``, ``8e+18 bytes`` (beyond a pebibyte: scientific)."""
    if not math.isfinite(size) or size >= 2**50:
        return f"{size:.3g} bytes"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size:.0f} bytes"


def require(cost: Cost, who: str, phase: str = "plan", limit: float | None = None) -> None:
    """Raise :class:`MemoryBudgetError` when ``phase`` ("plan" or "run") exceeds the budget."""
    limit = memory_limit() if limit is None else limit
    need, what = (
        (cost.plan_bytes, cost.plan_what) if phase == "plan" else (cost.run_bytes, cost.run_what)
    )
    if need > limit:
        verb = "needs" if phase == "plan" else "running on data needs"
        raise MemoryBudgetError(
            f"{who}: {verb} {what} ({need:.3g} bytes); the limit is {format_bytes(limit)}"
        )


# ----- sizes of the common pieces (floats: no overflow, no allocation) ---------------------
def cells(sizes: Iterable[int]) -> float:
    """Number of cells of a (sub)domain with these attribute sizes, as a float."""
    return math.prod(float(n) for n in sizes)


def count(n: float) -> str:
    """A cell or row count as text: ``4,096`` when small, ``1e+18`` when not."""
    return f"{n:,.0f}" if n < 1e7 else f"{n:.3g}"


def dense_gram(n: float) -> tuple[float, str]:
    """Bytes of an explicit n x n float matrix, and its description."""
    return FLOAT * n * n, f"a dense {count(n)} x {count(n)} Gram"


def data_vector(n: float, copies: float = 8.0) -> tuple[float, str]:
    """Bytes of ``copies`` float vectors over the full domain (the data vector, the strategy's
    answers and noise, the estimate and their temporaries: eight at the peak measured on the
    identity mechanism at 1e6 cells)."""
    return FLOAT * copies * n, f"vectors over all {count(n)} cells"


# ----- cost models of the strategy families ------------------------------------------------
#: The models :func:`estimate_model` knows: what a family allocates (see each function).
MODELS = ("domain", "factors", "dense", "marginals", "residuals")


def _shape(workload: Workload) -> tuple[float, ...]:
    return tuple(float(a.size) for a in workload.domain)


def _workload_pieces(workload: Workload) -> tuple[float, float, float, float]:
    """(largest factor Gram bytes, explicit rows bytes, marginal-closure cells, answers bytes).

    Factor Grams are the n_i x n_i Grams of one attribute; explicit groups (random, matrix,
    affine, abs_diff) hold their rows over their marginal; the closure cells bound the
    marginals a marginal-based plan measures (``prod(1 + n_i)`` over a term's attributes
    counts every sub-marginal of it once).
    """
    shape = _shape(workload)
    gram = explicit = closure = 0.0
    for term in workload.terms:
        sizes = [shape[i] for i in term.attrs]
        if term.factors is None:
            explicit += FLOAT * float(term.num_queries) * cells(sizes)
        else:
            gram = max(gram, max((_factor_bytes(f) for f in term.factors), default=0.0))
        closure += math.prod(1.0 + s for s in sizes)
    return gram, explicit, closure, FLOAT * float(workload.num_queries)


def _factor_bytes(factor: Matrix) -> float:
    """Bytes of the n x n Gram of a 1-D factor and its working copy; vectors for identity and
    total factors, whose Grams are never formed."""
    n = float(factor.shape[1])
    return 2.0 * FLOAT * n if isinstance(factor, Identity | Ones) else 2.0 * FLOAT * n * n


def _largest(*pieces: tuple[float, str]) -> tuple[float, str]:
    return max(pieces, key=lambda piece: piece[0])


def estimate_domain(workload: Workload) -> Cost:
    """A strategy answered over the full domain vector (identity, hierarchical, workload).

    Planning works attribute by attribute: vectors over one attribute (column norms, the
    strategy's factor) and the Grams of its non-trivial 1-D queries; running holds the data
    vector, the noisy answers, the estimate and the workload answers.
    """
    shape = _shape(workload)
    n = cells(shape)
    gram, explicit, _, answers = _workload_pieces(workload)
    largest = max(shape, default=1.0)
    plan_bytes, plan_what = _largest(
        (4.0 * FLOAT * largest, f"vectors over {count(largest)} values of one attribute"),
        (gram, "per-attribute Grams"),
        (explicit, "the explicit query rows"),
    )
    run_bytes, run_what = data_vector(n, 8.0)
    terms = float(len(workload.terms))
    return Cost(
        plan_bytes=plan_bytes,
        run_bytes=run_bytes + answers + explicit,
        plan_operations=terms * (math.fsum(shape) + (gram / FLOAT) ** 1.5),
        run_operations=terms * n * max(math.log2(max(n, 2.0)), 1.0) + answers / FLOAT,
        plan_what=plan_what,
        run_what=run_what,
    )


def estimate_factors(workload: Workload) -> Cost:
    """Per-attribute optimisation (OPT_kron, OPT_+): a few p x n_i factors per attribute and
    term; running is a Kronecker product over the full domain vector."""
    base = estimate_domain(workload)
    gram, explicit, _, _ = _workload_pieces(workload)
    plan_bytes, plan_what = _largest(
        (8.0 * gram, "per-attribute strategy factors"), (explicit, "the explicit query rows")
    )
    terms = float(len(workload.terms))
    return Cost(
        plan_bytes=plan_bytes,
        run_bytes=base.run_bytes,
        plan_operations=terms * 100.0 * (gram / FLOAT) ** 1.5,
        run_operations=base.run_operations,
        plan_what=plan_what,
        run_what=base.run_what,
    )


def estimate_dense(workload: Workload) -> Cost:
    """An explicit strategy over the whole domain (OPT_0, dense eigen-design): the n x n Gram,
    its eigenvectors or the p x n strategy, and their products (about twelve n x n arrays at
    the peak, measured on OPT_0 at n = 64 and 256)."""
    n = cells(_shape(workload))
    base = estimate_domain(workload)
    gram_bytes, gram_what = dense_gram(n)
    return Cost(
        plan_bytes=12.0 * gram_bytes,
        run_bytes=base.run_bytes + gram_bytes,
        plan_operations=100.0 * n**3,
        run_operations=n * n + base.run_operations,
        plan_what=gram_what,
        run_what=gram_what,
    )


def estimate_marginals(workload: Workload) -> Cost:
    """Marginal-based plans (ResidualPlanner, QuerySmasher, OPT_M): tables over the marginals
    of the workload and their sub-marginals, never the full domain."""
    _, explicit, closure, answers = _workload_pieces(workload)
    shape = _shape(workload)
    tables = (6.0 * FLOAT * closure, f"tables over {count(closure)} marginal cells")
    per_attribute = (
        FLOAT * max((s * s for s in shape), default=0.0),
        f"per-attribute {count(max(shape, default=1.0))}-square bases",
    )
    plan_bytes, plan_what = _largest(tables, per_attribute, (explicit, "the explicit query rows"))
    return Cost(
        plan_bytes=plan_bytes,
        run_bytes=tables[0] + answers + explicit,
        plan_operations=closure * max(shape, default=1.0),
        run_operations=closure * max(shape, default=1.0) + answers / FLOAT,
        plan_what=plan_what,
        run_what=tables[1],
    )


#: Bytes of planning state per workload term of a residual plan (its decomposition, residual
#: sub-workloads and sub-mechanisms): QuerySmasher's Table 5 workload [30]^40 (10,700 terms)
#: planned at a 574 MB peak resident set, imports included.
RESIDUAL_TERM_BYTES = 32.0 * 1024


def estimate_residuals(workload: Workload) -> Cost:
    """Residual plans (ResidualPlanner, QuerySmasher): planning works residual by residual,
    with per-attribute bases and a little state per term, never a marginal table; running
    measures and reconstructs the tables of :func:`estimate_marginals`."""
    tables = estimate_marginals(workload)
    _, explicit, _, _ = _workload_pieces(workload)
    shape = _shape(workload)
    terms = float(len(workload.terms))
    plan_bytes, plan_what = _largest(
        (FLOAT * max((s * s for s in shape), default=0.0),
         f"per-attribute {count(max(shape, default=1.0))}-square bases"),
        (RESIDUAL_TERM_BYTES * terms, f"the plans of {count(terms)} residual sub-workloads"),
        (explicit, "the explicit query rows"),
    )
    return replace(tables, plan_bytes=plan_bytes, plan_what=plan_what)


def estimate_model(model: str, workload: Workload) -> Cost:
    """The cost of ``workload`` under one of :data:`MODELS`, with the fixed :data:`OVERHEAD`."""
    cost = {
        "domain": estimate_domain,
        "factors": estimate_factors,
        "dense": estimate_dense,
        "marginals": estimate_marginals,
        "residuals": estimate_residuals,
    }[model](workload)
    return replace(cost, plan_bytes=cost.plan_bytes + OVERHEAD, run_bytes=cost.run_bytes + OVERHEAD)


def worst(costs: Iterable[Cost]) -> Cost:
    """The phase-by-phase maximum of several costs (plans that all run, one is kept)."""
    costs = list(costs)
    plan = max(costs, key=lambda c: c.plan_bytes)
    run = max(costs, key=lambda c: c.run_bytes)
    return Cost(
        plan_bytes=plan.plan_bytes,
        run_bytes=run.run_bytes,
        plan_operations=sum(c.plan_operations for c in costs),
        run_operations=max(c.run_operations for c in costs),
        plan_what=plan.plan_what,
        run_what=run.run_what,
    )


def estimate_census(regions: float, buckets: float, trials: float = 1.0) -> Cost:
    """A hierarchical group-size release: ``regions`` (all levels) x ``buckets`` histograms.

    Building the hierarchy holds a few copies of the leaf and level tables (the size profiles,
    the counts, the cumulative sums); each trial adds noisy and post-processed copies and the
    per-trial summaries are kept for every trial.
    """
    tables = FLOAT * regions * buckets
    what = f"{count(regions)} regions x {count(buckets)} size buckets"
    return Cost(
        plan_bytes=6.0 * tables,
        run_bytes=10.0 * tables + 8.0 * FLOAT * trials,
        plan_operations=regions * buckets,
        run_operations=trials * regions * buckets * max(math.log2(max(buckets, 2.0)), 1.0),
        plan_what=f"tables of {what}",
        run_what=f"tables of {what}",
    )
