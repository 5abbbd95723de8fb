"""The mechanism contract: ``Mechanism.plan(workload, privacy) -> Plan``, and registration.

A :class:`Plan` is immutable: the chosen strategy, its sensitivities, the unit-noise trace
``tr[(A^T A)^+ W^T W]`` and timings. Its error at any privacy level of the same noise family is
a rescale (``plan.rmse(privacy)``); ``plan.with_privacy(p)`` re-targets it without
re-optimising. ``plan.measure(data, rng)`` adds calibrated noise to the strategy's answers and
``plan.reconstruct(measurement)`` returns the workload answers.

Example:
    >>> from engine.mechanisms import get
    >>> from engine.workloads import Workload, PrefixBlock
    >>> from engine.privacy import Privacy
    >>> plan = get("identity").plan(Workload.one_dim(PrefixBlock(64)), Privacy(noise="laplace"))
    >>> round(plan.rmse(), 4)
    8.0623
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import param

from engine import html_tables as html
from engine.analysis import expected_error as error
from engine.analysis.cost_model import Cost, estimate_model, require
from engine.analysis.per_query_error import METHODS, error_half_widths, typical_half_width
from engine.analysis.strategy_picture import block_image
from engine.errors import NotApplicable
from engine.linalg.marginals import MarginalStrategy
from engine.linalg.matrix import Matrix
from engine.mechanisms.views import FactsView, Scalar, View, check_views
from engine.noise import (
    ExactNoise,
    column_support,
    exact_noise,
    is_integral,
    release_rng,
)
from engine.privacy import NOISE_TYPES, Privacy, budget_for_rmse
from engine.progress import Progress
from engine.workloads.labels import readable_labels
from engine.workloads.workload import Workload

#: data accepted by ``Plan.measure``: a data vector, or an object with ``marginal(names)``
#: and ``domain`` (an ``engine.data.Dataset``).
Data = Any


@dataclass(frozen=True)
class Measurement:
    """Noisy strategy answers ``y = A x + noise`` with the noise std that was used."""

    y: np.ndarray
    noise_std: float | np.ndarray
    seconds: float = 0.0
    #: the exact sampler, grid and guarantee of the noise (None: a mechanism's own noise)
    noise: ExactNoise | None = None


class _NoiseFree:
    """What one (workload, strategy) determines whatever the noise scale (the unit per-query
    variances, a typical query's error over the RMSE...), each computed at most once.

    Shared by a plan and its re-calibrations (``Plan.with_privacy``): they differ only in the
    noise scale. Pickled with the plan, so a plan made in a worker process comes back with what
    the worker computed. The lock makes concurrent first calls (web sessions sharing a plan)
    wait for one computation instead of repeating it; it is re-entrant because one value may
    be computed from another.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._values: dict[Hashable, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:  # a lock does not pickle: a copy gets its own
            return {"values": dict(self._values)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._lock = threading.RLock()
        self._values = state["values"]
        for value in self._values.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)  # shared, as before pickling

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key not in self._values:
                self._values[key] = compute()
            return self._values[key]


@dataclass(frozen=True, eq=False)
class Plan:
    """A planned (data-independent) mechanism for one workload.

    Attributes:
        mechanism: registered name of the mechanism that made the plan.
        workload: the workload the plan answers.
        privacy: the privacy level it is calibrated to.
        strategy: the measurement matrix A (implicit); None for mechanisms that measure
            through their own routine.
        trace: ``tr[(A^T A)^+ W^T W]`` for ``strategy`` as stored (unit noise per unit
            sensitivity); inf when A does not support W.
        sensitivity: ``{1: L1, 2: L2}`` sensitivities of the strategy.
        plan_seconds: wall-clock time spent planning.
        shown: typed views of how the mechanism works (``views()``; see
            :mod:`engine.mechanisms.views`), checked when the plan is made.
        reconstructor: custom ``(plan, y) -> workload answers`` (default: least squares).
        query_variances: custom ``plan -> unit per-query variances`` (default: generic).
        measurer: custom ``(plan, data, rng) -> Measurement`` (default: ``A x + noise``).
    """

    mechanism: str
    workload: Workload
    privacy: Privacy
    strategy: Matrix | None
    trace: float
    sensitivity: Mapping[int, float]
    plan_seconds: float = 0.0
    shown: tuple[View, ...] = ()
    reconstructor: Callable[[Plan, np.ndarray], np.ndarray] | None = None
    query_variances: Callable[[Plan], np.ndarray] | None = None
    measurer: Callable[[Plan, Data, np.random.Generator], Measurement] | None = None
    #: k of the grid spacing 2**-k that real-valued strategy answers are released on (None:
    #: the coarsest grid that enlarges the sensitivity by at most 2**-10)
    grid_exponent: int | None = None
    _noise_free: _NoiseFree = field(default_factory=_NoiseFree, init=False, repr=False,
                                    compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shown", check_views(self.shown))

    # ----- views ----------------------------------------------------------------------
    def views(self) -> tuple[View, ...]:
        """Typed views of the strategy and the optimiser's results, for a page to draw."""
        return self.shown

    def view(self, key: str) -> View:
        """The view with this key (KeyError naming the keys there are)."""
        for v in self.shown:
            if v.key == key:
                return v
        raise KeyError(f"{self.mechanism}: no view {key!r}; views: "
                       f"{', '.join(v.key for v in self.shown) or 'none'}")

    def facts(self) -> dict[str, Scalar]:
        """Every named fact of the plan's FactsViews, ``{key: value}`` (first one wins)."""
        out: dict[str, Scalar] = {}
        for v in self.shown:
            if isinstance(v, FactsView):
                for f in v.facts:
                    out.setdefault(f.key, f.value)
        return out

    def fact(self, key: str) -> Scalar:
        """The value of the named fact (KeyError naming the facts there are)."""
        known = self.facts()
        if key not in known:
            raise KeyError(f"{self.mechanism}: no fact {key!r}; facts: {', '.join(known)}")
        return known[key]

    # ----- error ----------------------------------------------------------------------
    def unit_tse(self, norm: int | None = None) -> float:
        """``||A||**2 tr[(A^T A)^+ W^T W]`` in the given (default: the plan's) norm."""
        norm = self.privacy.norm if norm is None else norm
        return self.sensitivity[norm] ** 2 * self.trace

    def tse(self, privacy: Privacy | None = None) -> float:
        """Expected total squared error at ``privacy`` (default: the plan's)."""
        p = self.privacy if privacy is None else privacy
        return p.unit_variance() * self.unit_tse(p.norm)

    def rmse(self, privacy: Privacy | None = None) -> float:
        """Root mean squared error per workload query at ``privacy``."""
        return math.sqrt(self.tse(privacy) / self.workload.num_queries)

    def budget_for_rmse(self, target: float, privacy: Privacy | None = None) -> float:
        """The smallest eps (or rho for zcdp) at which the RMSE is at most ``target``.

        ``privacy`` (default: the plan's) gives the noise family and, for Gaussian noise, the
        delta and calibration; see :func:`engine.privacy.budget_for_rmse` (0.0: every budget
        reaches the target; SpecError for a target <= 0 or an unreachable one).
        """
        p = self.privacy if privacy is None else privacy
        return budget_for_rmse(p, target, math.sqrt(self.unit_tse(p.norm)
                                                    / self.workload.num_queries))

    def with_privacy(self, privacy: Privacy) -> Plan:
        """The same strategy re-calibrated to another privacy level (no re-optimisation).

        The re-calibrated plan shares what this plan has computed that does not depend on the
        noise scale (:meth:`noise_free`), such as the unit per-query variances.
        """
        plan = replace(self, privacy=privacy)
        object.__setattr__(plan, "_noise_free", self._noise_free)
        return plan

    def noise_free(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()``, once per plan and its re-calibrations: for a quantity the strategy
        determines whatever the privacy level (the caller's ``key`` names it). Kept with the
        plan, pickled with it, and shared by :meth:`with_privacy`'s copies."""
        return self._noise_free.get(key, compute)

    def unit_variances(self) -> np.ndarray:
        """``w^T (A^T A)^+ w`` for every workload row w (read-only; computed once per plan).

        Multiplied by ``sigma**2 ||A||**2`` it gives the per-query variances; see
        :meth:`variances`.
        """
        return self.noise_free("unit variances", self._compute_unit_variances)

    def _compute_unit_variances(self) -> np.ndarray:
        if self.query_variances is not None:
            value = self.query_variances(self)
        else:
            value = error.per_query_variances(self.workload, self._strategy())
        value = np.array(value, dtype=float)
        value.setflags(write=False)  # shared: callers get a read-only view
        return value

    def variances(self, privacy: Privacy | None = None) -> np.ndarray:
        """Expected squared error of every workload query at ``privacy`` (squared counts).

        A rescale of :meth:`unit_variances`, which are computed only on the first call.
        """
        p = self.privacy if privacy is None else privacy
        return p.unit_variance() * self.sensitivity[p.norm] ** 2 * self.unit_variances()

    def noise_std(self) -> float:
        """Std of the noise added to each strategy answer."""
        return self.privacy.sigma() * self.sensitivity[self.privacy.norm]

    # ----- running --------------------------------------------------------------------
    def _strategy(self) -> Matrix:
        if self.strategy is None:
            raise NotApplicable(f"{self.mechanism}: the plan has no explicit strategy")
        return self.strategy

    def exact_noise(self) -> ExactNoise:
        """The exact noise of this plan's measurement (sampler, grid, calibrated scale).

        Integer strategies are released on the integers; others on the grid
        ``2**-grid_exponent`` with the sensitivity bound of :mod:`engine.noise`.
        """
        A = self._strategy()
        return exact_noise(self.privacy, self.sensitivity.get(1, math.inf),
                           self.sensitivity.get(2, math.inf), integral=is_integral(A),
                           support=column_support(A), grid_exponent=self.grid_exponent)

    def add_noise(self, exact: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray,
                                                                             ExactNoise]:
        """``exact`` rounded to the plan's grid plus exact integer noise on it."""
        noise = self.exact_noise()
        return noise.apply(exact, rng), noise

    def measure(self, data: Data, rng: np.random.Generator | None = None, *,
                grid_exponent: int | None = None) -> Measurement:
        """Noisy answers to the strategy on ``data`` (a data vector or a Dataset).

        Args:
            data: the data vector or a Dataset.
            rng: the generator; None (the default, for a release) seeds one from the OS.
            grid_exponent: k of the grid 2**-k for real-valued strategies (default: the
                plan's, automatic unless set: :func:`engine.noise.auto_grid_exponent`).
        """
        rng = release_rng() if rng is None else rng
        plan = self if grid_exponent is None else replace(self, grid_exponent=grid_exponent)
        if plan.measurer is not None:
            return plan.measurer(plan, data, rng)
        start = time.perf_counter()
        A = plan._strategy()
        if isinstance(A, MarginalStrategy) and hasattr(data, "marginal"):
            names = data.domain.names
            exact = A.measure_marginals(lambda ax: data.marginal([names[i] for i in ax]))
        else:
            exact = A.matvec(data_vector(data))
        y, noise = plan.add_noise(exact, rng)
        return Measurement(y, noise.noise_std, time.perf_counter() - start, noise)

    def reconstruct(self, measurement: Measurement | np.ndarray) -> np.ndarray:
        """Workload answers estimated from the measurement (least squares by default)."""
        y = measurement.y if isinstance(measurement, Measurement) else np.asarray(measurement)
        if self.reconstructor is not None:
            return self.reconstructor(self, y)
        return self.workload.answer(least_squares(self._strategy(), y))

    def run(self, data: Data, rng: np.random.Generator | None = None, *,
            grid_exponent: int | None = None) -> np.ndarray:
        """Measure and reconstruct: private answers to every workload query (OS entropy
        unless ``rng`` is given)."""
        return self.reconstruct(self.measure(data, rng, grid_exponent=grid_exponent))

    def summary(self) -> dict[str, Any]:
        """Name, RMSE at the plan's privacy, planning time."""
        return {"mechanism": self.mechanism, "rmse": self.rmse(),
                "plan_seconds": self.plan_seconds}

    # ----- notebooks ------------------------------------------------------------------
    def per_query_error(self, privacy: Privacy | None = None, *, level: float = 0.95
                        ) -> pd.DataFrame:
        """Every workload query's error at ``privacy`` (default: the plan's), in people.

        Columns: ``query`` (readable label), ``std`` (standard deviation of its error,
        counts), ``error`` (the answer is within +/- this many people with probability
        ``level``: the exact Gaussian quantile, for Laplace noise a Chernoff bound, which the
        exact quantile never exceeds) and ``method`` (a key of
        :data:`engine.analysis.per_query_error.METHODS`).

        Raises:
            ValueError: for a workload of more than a million queries (too many to label).
        """
        plan = self if privacy is None else self.with_privacy(privacy)
        labels = readable_labels(self.workload)
        half_widths, method = error_half_widths(plan, level)
        return pd.DataFrame({"query": labels, "std": np.sqrt(plan.variances()),
                             "error": half_widths, "method": method})

    def plot(self) -> Any:
        """The strategy as a HoloViews image: one row per noisy measurement, one column per
        data cell, shaded by the weight of the cell in the measurement (needs HoloViews).
        Beyond :data:`engine.plotting.IMAGE_LIMIT` pixels a pixel shows the average size of
        the weights it covers, computed from the implicit matrix (any size).

        Raises:
            NotApplicable: a plan without an explicit strategy matrix.
        """
        from engine import plotting  # HoloViews only when a picture is asked for

        A = self._strategy()
        rows, cols = plotting.IMAGE_LIMIT
        exact = A.shape[0] <= rows and A.shape[1] <= cols
        picture = block_image(A, rows, cols, statistic="mean" if exact else "mean_abs")
        return plotting.strategy_image(picture.values, extent=A.shape,
                                       title=f"Strategy of {self.mechanism}")

    def __repr__(self) -> str:
        return (f"Plan({self.mechanism}, {self.workload.describe()}, {self.privacy.describe()}, "
                f"RMSE {self.rmse():.4g})")

    def _repr_html_(self) -> str:
        """The plan in a notebook: error at its privacy level, sensitivities, facts."""
        half_width, method = typical_half_width(self)
        rows: list[tuple[str, str]] = [
            ("workload", self.workload.describe()),
            ("privacy", self.privacy.describe()),
            ("RMSE (people)", html.number(self.rmse())),
            ("error at 95 % (people)", f"+/- {html.number(half_width)}"),
            ("noise std per measurement", html.number(self.noise_std())),
            ("sensitivity L1 / L2", f"{html.number(self.sensitivity.get(1, math.inf))} / "
                                    f"{html.number(self.sensitivity.get(2, math.inf))}"),
            ("strategy", "own routine" if self.strategy is None
             else f"{self.strategy.shape[0]:,} x {self.strategy.shape[1]:,}"),
            ("planning", f"{self.plan_seconds:.3g} s")]
        rows += [(key, str(value)) for key, value in self.facts().items()]
        return html.titled(f"Plan: {self.mechanism}", html.table(rows),
                           note=f"error at 95 %: {METHODS[method]}, for a query whose error "
                                "has the RMSE as its standard deviation")


def data_vector(data: Data) -> np.ndarray:
    """The data vector of ``data`` (an array, or a Dataset below the size guard)."""
    if hasattr(data, "datavector"):
        return np.asarray(data.datavector(), dtype=float)
    return np.asarray(data, dtype=float).reshape(-1)


def least_squares(A: Matrix, y: np.ndarray) -> np.ndarray:
    """``A^+ y`` through the strategy's own pseudo-inverse (Kronecker factor-wise, marginal
    closed form, explicit below the size guard); NotApplicable when it has none."""
    try:
        pinv = A.pinv()
    except ValueError as exc:
        raise NotApplicable(f"least squares: {exc}") from None
    return pinv.matvec(np.asarray(y, dtype=float))


class Mechanism(param.Parameterized):
    """Base of every mechanism: explicit keyword knobs, ``plan`` returns an immutable Plan.

    Subclasses set ``name`` (the registry key, via ``registered_name``), ``title`` and
    ``family``, implement
    ``_plan(workload, privacy, progress)``, and may override ``check`` to refuse workloads or
    noise types they cannot serve ("not applicable: ...").
    """

    name = param.String(default="", constant=True, doc="Registered mechanism name.")
    title: ClassVar[str] = ""
    family: ClassVar[str] = "baseline"
    description: ClassVar[str] = ""
    data_dependent: ClassVar[bool] = False
    noises: ClassVar[tuple[str, ...]] = NOISE_TYPES
    #: how the family allocates, one of ``engine.analysis.cost_model.MODELS`` (see ``estimate``)
    cost_model: ClassVar[str] = "domain"
    #: registered mechanisms whose plans this one's planning asks for (inside
    #: :func:`shared_plans` a comparison plans those rows first and passes their plans on)
    composes: ClassVar[tuple[str, ...]] = ()

    def check(self, workload: Workload, privacy: Privacy) -> None:
        """Raise NotApplicable when this mechanism cannot serve the workload or noise."""
        if privacy.noise not in self.noises:
            raise NotApplicable(f"{self.name} supports {', '.join(self.noises)} noise, "
                                f"not {privacy.noise}")

    def estimate(self, workload: Workload, privacy: Privacy) -> Cost:
        """Peak memory (bytes) and work of planning and running, from the workload's structure
        alone, without allocating (``engine.analysis.cost_model``; the family's ``cost_model``
        by default)."""
        return estimate_model(self.cost_model, workload)

    def plan(self, workload: Workload, privacy: Privacy, progress: Progress | None = None
             ) -> Plan:
        """Choose the strategy for ``workload`` at ``privacy`` (uses no privacy budget).

        Raises:
            NotApplicable: the mechanism cannot serve the workload or noise.
            MemoryBudgetError: the plan's estimated memory exceeds
                ``engine.analysis.cost_model.memory_limit()``.
        """
        if self.data_dependent:
            raise NotApplicable(f"{self.name} is data-dependent: use its run() on data")
        self.check(workload, privacy)
        known = self.shared_plan(workload, privacy)
        if known is not None:
            return known
        require(self.estimate(workload, privacy), self.name, "plan")
        start = time.perf_counter()
        plan = self._plan(workload, privacy, progress)
        plan = replace(plan, plan_seconds=time.perf_counter() - start)
        memo = _SHARED_PLANS.get()
        if memo is not None:  # holds the workload: its id cannot be reused meanwhile
            memo[self._shared_key(workload, privacy)] = plan
        return plan

    def shared_plan(self, workload: Workload, privacy: Privacy) -> Plan | None:
        """The plan this mechanism (same knobs) already made for this workload object and
        privacy level inside :func:`shared_plans` (``plan_seconds`` 0), else None."""
        memo = _SHARED_PLANS.get()
        known = None if memo is None else memo.get(self._shared_key(workload, privacy))
        if known is None or known.workload is not workload:  # the same object, not its id
            return None
        return replace(known, plan_seconds=0.0)

    def _shared_key(self, workload: Workload, privacy: Privacy) -> tuple[Any, ...]:
        return (type(self), self.knob_values(), id(workload), repr(privacy.to_spec()))

    def knob_values(self) -> tuple[tuple[str, str], ...]:
        """The knobs (param values but the name) as a sorted tuple of ``(name, repr)``."""
        return tuple(sorted((k, repr(v)) for k, v in self.param.values().items()
                            if k != "name"))

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        raise NotImplementedError(type(self).__name__ + " must define _plan")


#: the plans made inside :func:`shared_plans`, by mechanism class, knobs, workload, privacy
_SHARED_PLANS: contextvars.ContextVar[dict[tuple[Any, ...], Plan] | None] = (
    contextvars.ContextVar("shared_plans", default=None))


@contextlib.contextmanager
def shared_plans(known: Iterable[tuple[Mechanism, Plan]] = ()) -> Iterator[None]:
    """Within this block (in this thread), a mechanism asked again for a plan it already
    made, with the same knobs, workload object and privacy level, returns that plan
    (``plan_seconds`` 0) instead of optimising again.

    A comparison uses it so that ``hdmm``, which runs each operator as its registered
    mechanism, and the rows ``hdmm-opt0``, ``hdmm-kron``, ... share one optimisation each.

    Args:
        known: ``(mechanism, plan)`` pairs made elsewhere (e.g. on another worker) that
            count as already made by that mechanism for ``plan.workload`` (the object) and
            ``plan.privacy``.
    """
    memo = {} if _SHARED_PLANS.get() is None else _SHARED_PLANS.get()
    for mechanism, plan in known:
        memo[mechanism._shared_key(plan.workload, plan.privacy)] = plan
    token = _SHARED_PLANS.set(memo)
    try:
        yield
    finally:
        _SHARED_PLANS.reset(token)


_REGISTRY: dict[str, type[Mechanism]] = {}


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Class decorator: add a mechanism to the registry under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


def registered() -> Mapping[str, type[Mechanism]]:
    """The mechanisms registered so far, by name in registration order (a read-only view).

    Complete once :mod:`engine.mechanisms` is imported: that package imports every family,
    and its ``registry_names`` / ``mechanism_class`` / ``get`` look names up here.
    """
    return MappingProxyType(_REGISTRY)


def registered_name(name: str) -> param.String:
    """The ``name`` parameter of a registered mechanism class (constant, defaults to name)."""
    return param.String(default=name, constant=True, doc="Registered mechanism name.")
