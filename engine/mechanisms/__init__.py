"""Mechanisms: the base contract, the registry, and one module per family.

Importing this package registers every mechanism (each family's module registers its
classes with :func:`engine.mechanisms.base.register`); :func:`registry_names` lists them and
:func:`get` makes one by name. The lookups live here, above the families, so that no module a
family imports has to import every family.
"""

from typing import Any

from engine.errors import SpecError, suggest
from engine.mechanisms import (
    aim_grem,  # noqa: F401  (registers aim-grem)
    baselines,  # noqa: F401  (registers the baselines)
    eigen_design,  # noqa: F401  (registers eigen-design)
    hdmm,  # noqa: F401  (registers hdmm, hdmm-opt0, hdmm-kron, hdmm-union, hdmm-marginals)
    hierarchical,  # noqa: F401  (registers hierarchical-pgsr)
    online_blt,  # noqa: F401  (registers online-blt)
    online_optimal,  # noqa: F401  (registers online-optimal)
    online_sqrt,  # noqa: F401  (registers online-sqrt)
    online_tree,  # noqa: F401  (registers online-tree)
    residual,  # noqa: F401  (registers residual-planner, querysmasher)
)
from engine.mechanisms.base import (
    Measurement,
    Mechanism,
    Plan,
    register,
    registered,
)


def registry_names() -> tuple[str, ...]:
    """Registered mechanism names, in registration order."""
    return tuple(registered())


def mechanism_class(name: str) -> type[Mechanism]:
    """The class registered under ``name`` (SpecError with a suggestion otherwise)."""
    known = registered()
    try:
        return known[name]
    except KeyError:
        raise SpecError(f"mechanism: unknown name {name!r}{suggest(name, known)}; "
                        f"allowed: {', '.join(known)}") from None


def get(name: str, **params: Any) -> Mechanism:
    """An instance of the mechanism registered under ``name`` with the given knobs."""
    return mechanism_class(name)(**params)


__all__ = ["Measurement", "Mechanism", "Plan", "get", "mechanism_class", "register",
           "registry_names"]
