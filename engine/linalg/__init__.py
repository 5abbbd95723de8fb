"""Implicit matrices: Kronecker products, weighted stacks, sums, and the marginal algebra.

Nothing here subclasses ``scipy.sparse.linalg.LinearOperator`` (it blocks numpy ufuncs).
Every matrix knows its shape, how to multiply a vector, its Gram matrix, its column norms
and its Frobenius norm without being materialised; ``dense()`` refuses above a size guard.
"""

from engine.linalg.matrix import (
    DENSE_GUARD,
    Dense,
    Identity,
    Kron,
    Matrix,
    Ones,
    Sparse,
    Sum,
    VStack,
    kmatvec,
)

__all__ = ["DENSE_GUARD", "Dense", "Identity", "Kron", "Matrix", "Ones", "Sparse", "Sum", "VStack",
           "kmatvec"]
