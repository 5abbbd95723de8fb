"""Mechanisms: the base contract, the registry, and one module per family.

Importing this package registers every mechanism; ``registry_names()`` lists them.
"""

from engine.mechanisms import (
    aim_grem,  # noqa: F401  (registers aim-grem)
    baselines,  # noqa: F401  (registers the baselines)
    eigen_design,  # noqa: F401  (registers eigen-design)
    hdmm,  # noqa: F401  (registers hdmm, hdmm-opt0, hdmm-kron, hdmm-union, hdmm-marginals)
    hierarchical,  # noqa: F401  (registers hierarchical-pgsr)
    residual,  # noqa: F401  (registers residual-planner, querysmasher)
)
from engine.mechanisms.base import (
    Measurement,
    Mechanism,
    Plan,
    get,
    mechanism_class,
    register,
    registry_names,
)

__all__ = ["Measurement", "Mechanism", "Plan", "get", "mechanism_class", "register",
           "registry_names"]
