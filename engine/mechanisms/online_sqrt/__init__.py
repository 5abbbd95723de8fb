"""The square-root factorization for continual counting (Fichtenberger, Henzinger &
Upadhyay, "Constant matters: fine-grained error bound on differentially private continual
observation", ICML 2023).

Modules:
    mechanism: the registered ``online-sqrt`` mechanism (strategy and reconstruction are both
        the lower-triangular Toeplitz square root of the prefix matrix).
"""

from engine.mechanisms.online_sqrt.mechanism import OnlineSqrtMechanism, sqrt_closed_form_tse

__all__ = ["OnlineSqrtMechanism", "sqrt_closed_form_tse"]
