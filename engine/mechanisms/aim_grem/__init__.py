"""AIM+GReM: adaptive, data-dependent marginal release with residual reconstruction.

Modules: ``grem`` (residual measurements, GReM-MLE, lazy updates), ``crp`` (Conditional
ResidualPlanner), ``aim`` (the AIM+GReM loop and the ablation driver), ``baseline`` (batch
ResidualPlanner and the independent one-way baseline), ``pgm`` (optional AIM+PGM on ``mbi``),
``metrics`` (workload errors), ``result`` (the run's result) and ``mechanism`` (the registered
``aim-grem`` mechanism). Spec: ``shared/papers/aim_grem.md``.
"""

from engine.mechanisms.aim_grem.aim import aim_grem, fixed_sequence
from engine.mechanisms.aim_grem.baseline import independent, residual_planner
from engine.mechanisms.aim_grem.mechanism import AIMGReM, run_residual_planner
from engine.mechanisms.aim_grem.metrics import WorkloadErrors, workload_errors
from engine.mechanisms.aim_grem.result import POST_PROCESSING, AdaptiveResult, RoundRecord

__all__ = [
    "POST_PROCESSING",
    "AIMGReM",
    "AdaptiveResult",
    "RoundRecord",
    "WorkloadErrors",
    "aim_grem",
    "fixed_sequence",
    "independent",
    "residual_planner",
    "run_residual_planner",
    "workload_errors",
]
