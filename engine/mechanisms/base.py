"""The mechanism contract: ``Mechanism.plan(workload, privacy) -> Plan``, and the registry.

A :class:`Plan` is immutable: the chosen strategy, its sensitivities, the unit-noise trace
``tr[(A^T A)^+ W^T W]`` and timings. Its error at any privacy level of the same noise family is
a rescale (``plan.rmse(privacy)``); ``plan.with_privacy(p)`` re-targets it without
re-optimising. ``plan.measure(data, rng)`` adds calibrated noise to the strategy's answers and
``plan.reconstruct(measurement)`` returns the workload answers.

Example:
    >>> from engine.workloads import Workload, PrefixBlock
    >>> from engine.privacy import Privacy
    >>> plan = get("identity").plan(Workload.one_dim(PrefixBlock(64)), Privacy(noise="laplace"))
    >>> round(plan.rmse(), 4)
    8.0623
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
import param

from engine.cost import Cost, estimate_model, require
from engine.errors import NotApplicable, SpecError, suggest
from engine.linalg.marginals import MarginalStrategy
from engine.linalg.matrix import DENSE_GUARD, Kron, Matrix
from engine.linalg.pinv import psd_pinv
from engine.privacy import NOISE_TYPES, Privacy
from engine.progress import Progress
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
        details: what a dashboard needs to draw the strategy (see each mechanism).
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
    details: Mapping[str, Any] = field(default_factory=dict)
    reconstructor: Callable[[Plan, np.ndarray], np.ndarray] | None = None
    query_variances: Callable[[Plan], np.ndarray] | None = None
    measurer: Callable[[Plan, Data, np.random.Generator], Measurement] | None = None

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

    def with_privacy(self, privacy: Privacy) -> Plan:
        """The same strategy re-calibrated to another privacy level (no re-optimisation)."""
        return replace(self, privacy=privacy)

    def variances(self, privacy: Privacy | None = None) -> np.ndarray:
        """Expected squared error of every workload query at ``privacy``."""
        from engine.error import per_query_variances

        p = self.privacy if privacy is None else privacy
        unit = (self.query_variances(self) if self.query_variances is not None
                else per_query_variances(self.workload, self._strategy()))
        return p.unit_variance() * self.sensitivity[p.norm] ** 2 * unit

    def noise_std(self) -> float:
        """Std of the noise added to each strategy answer."""
        return self.privacy.sigma() * self.sensitivity[self.privacy.norm]

    # ----- running --------------------------------------------------------------------
    def _strategy(self) -> Matrix:
        if self.strategy is None:
            raise NotApplicable(f"{self.mechanism}: the plan has no explicit strategy")
        return self.strategy

    def measure(self, data: Data, rng: np.random.Generator) -> Measurement:
        """Noisy answers to the strategy on ``data`` (a data vector or a Dataset)."""
        if self.measurer is not None:
            return self.measurer(self, data, rng)
        start = time.perf_counter()
        A = self._strategy()
        if isinstance(A, MarginalStrategy) and hasattr(data, "marginal"):
            names = data.domain.names
            exact = A.measure_marginals(lambda ax: data.marginal([names[i] for i in ax]))
        else:
            exact = A.matvec(data_vector(data))
        std = self.noise_std()
        y = exact + self.privacy.sample(exact.shape, self.sensitivity[self.privacy.norm], rng)
        return Measurement(y, std, time.perf_counter() - start)

    def reconstruct(self, measurement: Measurement | np.ndarray) -> np.ndarray:
        """Workload answers estimated from the measurement (least squares by default)."""
        y = measurement.y if isinstance(measurement, Measurement) else np.asarray(measurement)
        if self.reconstructor is not None:
            return self.reconstructor(self, y)
        return self.workload.answer(least_squares(self._strategy(), y))

    def run(self, data: Data, rng: np.random.Generator) -> np.ndarray:
        """Measure and reconstruct: private answers to every workload query."""
        return self.reconstruct(self.measure(data, rng))

    def summary(self) -> dict[str, Any]:
        """Name, RMSE at the plan's privacy, planning time."""
        return {"mechanism": self.mechanism, "rmse": self.rmse(),
                "plan_seconds": self.plan_seconds}


def data_vector(data: Data) -> np.ndarray:
    """The data vector of ``data`` (an array, or a Dataset below the size guard)."""
    if hasattr(data, "datavector"):
        return np.asarray(data.datavector(), dtype=float)
    return np.asarray(data, dtype=float).reshape(-1)


def least_squares(A: Matrix, y: np.ndarray) -> np.ndarray:
    """``A^+ y`` using the strategy's structure (Kronecker, marginal) or explicitly."""
    if isinstance(A, Kron):
        pinvs = []
        for f in A.factors:
            F = f.dense()
            pinvs.append(psd_pinv(F.T @ F) @ F.T)
        from engine.linalg.matrix import kmatvec

        return kmatvec(pinvs, y)
    if isinstance(A, MarginalStrategy):
        return A.pinv_apply(y)
    if A.size > DENSE_GUARD:
        raise NotApplicable(f"least squares on a {A.shape[0]:,} x {A.shape[1]:,} strategy "
                            "needs a structured reconstruction")
    return np.linalg.lstsq(A.dense(), y, rcond=None)[0]


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
    #: how the family allocates, one of ``engine.cost.MODELS`` (see ``estimate``)
    cost_model: ClassVar[str] = "domain"

    def check(self, workload: Workload, privacy: Privacy) -> None:
        """Raise NotApplicable when this mechanism cannot serve the workload or noise."""
        if privacy.noise not in self.noises:
            raise NotApplicable(f"{self.name} supports {', '.join(self.noises)} noise, "
                                f"not {privacy.noise}")

    def estimate(self, workload: Workload, privacy: Privacy) -> Cost:
        """Peak memory (bytes) and work of planning and running, from the workload's structure
        alone, without allocating (``engine.cost``; the family's ``cost_model`` by default)."""
        return estimate_model(self.cost_model, workload)

    def plan(self, workload: Workload, privacy: Privacy, progress: Progress | None = None
             ) -> Plan:
        """Choose the strategy for ``workload`` at ``privacy`` (uses no privacy budget).

        Raises:
            NotApplicable: the mechanism cannot serve the workload or noise.
            MemoryBudgetError: the plan's estimated memory exceeds ``engine.cost.memory_limit()``.
        """
        if self.data_dependent:
            raise NotApplicable(f"{self.name} is data-dependent: use its run() on data")
        self.check(workload, privacy)
        require(self.estimate(workload, privacy), self.name, "plan")
        start = time.perf_counter()
        plan = self._plan(workload, privacy, progress)
        return replace(plan, plan_seconds=time.perf_counter() - start)

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        raise NotImplementedError(type(self).__name__ + " must define _plan")


_REGISTRY: dict[str, type[Mechanism]] = {}


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Class decorator: add a mechanism to the registry under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


def registry_names() -> tuple[str, ...]:
    """Registered mechanism names, in registration order."""
    _load_all()
    return tuple(_REGISTRY)


def mechanism_class(name: str) -> type[Mechanism]:
    """The class registered under ``name`` (SpecError with a suggestion otherwise)."""
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise SpecError(f"mechanism: unknown name {name!r}{suggest(name, _REGISTRY)}; "
                        f"allowed: {', '.join(_REGISTRY)}") from None


def get(name: str, **params: Any) -> Mechanism:
    """An instance of the mechanism registered under ``name`` with the given knobs."""
    return mechanism_class(name)(**params)


def _load_all() -> None:
    # Importing the package registers every mechanism module it lists.
    import engine.mechanisms  # noqa: F401


def registered_name(name: str) -> param.String:
    """The ``name`` parameter of a registered mechanism class (constant, defaults to name)."""
    return param.String(default=name, constant=True, doc="Registered mechanism name.")
