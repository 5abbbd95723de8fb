"""What a release costs: its privacy level and the guarantee its sampler achieves, as a
:class:`~engine.ledger.composition.Cost`.

* ``laplace`` (pure eps): the eps asked for (the discrete Laplace's achieved eps is at most it);
* ``zcdp``: the sampler's rho when the release record states one, else the rho asked for;
* ``gaussian`` (eps, delta): tracked by its zCDP rho: the sampler's (the exact discrete
  Gaussian's ``D**2 / (2 sigma**2)``, which the record states), else the largest rho implying
  the (eps, delta) asked for (what AIM+GReM and the residual family spend).
"""

from __future__ import annotations

from typing import Any

from engine.ledger.composition import Cost


def release_cost(privacy: Any, guarantee: dict[str, float] | None = None) -> Cost:
    """The cost of a release at ``privacy`` (an :class:`engine.privacy.Privacy`) whose noise
    achieves ``guarantee`` (``ExactNoise.guarantee``: ``{"rho": ...}`` or ``{"epsilon": ...}``;
    None when the mechanism states none)."""
    guarantee = guarantee or {}
    if privacy.noise == "laplace":
        return Cost.pure(float(privacy.epsilon))
    rho = float(guarantee.get("rho", privacy.zcdp_rho()))
    if privacy.noise == "zcdp":
        return Cost.zcdp(rho)
    return Cost.zcdp(rho, float(privacy.epsilon), float(privacy.delta))
