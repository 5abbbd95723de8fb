"""Buffered linear Toeplitz (BLT) factorizations for long streams (Dvijotham, McMahan,
Pillutla, Steinke & Thakurta, "Efficient and near-optimal noise generation for streaming
differential privacy", FOCS 2024).

Modules:
    fit: the BLT parameters (a few decay rates and weights) optimised for the horizon, with
        the error in closed form / O(n) recurrences;
    mechanism: the registered ``online-blt`` mechanism.
"""

from engine.mechanisms.online_blt.fit import BltFit, fit_blt
from engine.mechanisms.online_blt.mechanism import OnlineBltMechanism

__all__ = ["BltFit", "OnlineBltMechanism", "fit_blt"]
