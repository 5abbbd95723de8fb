"""The optimal causal factorization of the prefix matrix for total squared error under single
participation (Denisov, McMahan, Rush, Smith & Thakurta, "Improved differential privacy for
SGD via optimal private linear operators on data streams", NeurIPS 2022).

Modules:
    fixed_point: the convex programme over Grams ``X = C^T C`` with ``diag(X) <= 1``, solved
        in its dual by the fixed point of Denisov et al., with a duality-gap certificate;
    mechanism: the registered ``online-optimal`` mechanism (C: the lower-triangular factor of
        the optimal X).
"""

from engine.mechanisms.online_optimal.fixed_point import OptimalGram, optimal_gram
from engine.mechanisms.online_optimal.mechanism import OnlineOptimalMechanism

__all__ = ["OnlineOptimalMechanism", "OptimalGram", "optimal_gram"]
