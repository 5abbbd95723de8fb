"""One-dimensional query blocks over a single attribute of size n, and their registry.

Every block is an implicit :class:`~engine.linalg.Matrix` with closed-form Gram, column norms
and Frobenius norm, so that e.g. all ranges on n = 4096 (8.4M queries) never materialise.
Rows use 0-based cells; ranges are inclusive ``[a, b]``.

Each block class carries its spec ``name``, the ``options`` its spec mapping accepts and a
one-line ``help``; :data:`BLOCKS` maps the names to the classes, :meth:`Block.from_spec`
builds any block from its spec value and :meth:`Block.spec` gives that value back.

Example:
    >>> Block.from_spec({"block": "range", "width": 3}, 8).shape
    (6, 8)
    >>> BLOCKS["prefix"].help
    'counts of values <= v for every v (a CDF); ordered attributes'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import scipy.linalg as sla

from engine.errors import SpecError, suggest
from engine.linalg.matrix import DENSE_GUARD, Dense, Identity, Matrix, Ones
from engine.workloads.fields import check_keys, explicit_rows, integer, number, row_array


def _as2d(x: np.ndarray) -> tuple[np.ndarray, bool]:
    x = np.asarray(x, dtype=float)
    return (x[:, None], True) if x.ndim == 1 else (x, False)


def _out(y: np.ndarray, squeeze: bool) -> np.ndarray:
    return y[:, 0] if squeeze else y


def _csum(x: np.ndarray) -> np.ndarray:
    """Cumulative sums with a leading zero row: cs[k] = sum of x[:k]."""
    return np.concatenate([np.zeros((1,) + x.shape[1:]), np.cumsum(x, axis=0)])


class Block(Matrix):
    """Base of the 1-D blocks: ``from_spec`` builds one from its spec value, ``spec()``
    returns that value."""

    n: int

    #: The block's name in a spec (its key in :data:`BLOCKS`).
    name: ClassVar[str] = ""
    #: Keys its spec mapping accepts besides ``block``.
    options: ClassVar[tuple[str, ...]] = ()
    #: One plain line on what the block asks, for menus and docs.
    help: ClassVar[str] = ""

    @classmethod
    def from_spec(cls, value: Any, n: int, where: str = "block") -> Block:
        """Build the block a spec value names, over n cells.

        Args:
            value: a bare block name (``"prefix"``) or a mapping with ``block:`` and the
                block's options (``{"block": "range", "width": 10}``).
            n: number of cells (values) of the attribute.
            where: the field path used in error messages.

        Raises:
            SpecError: one line naming the field, e.g. ``where: unknown block 'prefx' (did
                you mean 'prefix'?); allowed: ...``.
        """
        names = tuple(BLOCKS)
        if isinstance(value, str):
            name, opts = value, {}
        elif isinstance(value, Mapping):
            if "block" not in value:
                for key in value:  # a misspelt 'block' key is the likely mistake: name it
                    hint = suggest(str(key), ("block",))
                    if hint:
                        raise SpecError(f"{where}.{key}: unknown key{hint}")
                raise SpecError(f"{where}.block: missing (one of {', '.join(names)})")
            name, opts = value["block"], {k: v for k, v in value.items() if k != "block"}
        else:
            raise SpecError(f"{where}: expected a block name or a mapping with 'block', "
                            f"got {value!r}")
        if name not in BLOCKS:
            raise SpecError(f"{where}: unknown block {name!r}{suggest(str(name), names)}; "
                            f"allowed: {', '.join(names)}")
        block = BLOCKS[name]
        check_keys(opts, block.options, where)
        return block.from_options(opts, int(n), where)

    @classmethod
    def from_options(cls, options: Mapping[str, Any], n: int, where: str) -> Block:
        """This block over n cells from its spec options (keys already checked)."""
        return cls(n)  # type: ignore[call-arg]  # blocks without options take only n

    def spec(self) -> Any:
        """The block as a scenario-spec value (what :meth:`from_spec` reads back)."""
        return self.name

    def gram(self) -> Matrix:
        return Dense(self.gram_array())

    def gram_array(self) -> np.ndarray:
        """The n x n Gram matrix as a numpy array (closed form where one exists)."""
        d = self.dense()
        return d.T @ d

    def gram_eigenvalues(self) -> np.ndarray:
        """The n eigenvalues of ``W^T W`` (squared singular values of W, zeros included),
        in ascending order; closed forms where they exist (the SVD bound needs only these)."""
        return np.linalg.eigvalsh(self.gram_array())

    def gram_quadratic(self, X: np.ndarray) -> np.ndarray | float:
        """``x^T W^T W x = ||W x||**2`` for a vector x, or for every column of a 2-D X.

        Used to evaluate error in a known eigenbasis of a strategy
        (:mod:`engine.linalg.spectral`); blocks with many rows override it with a closed form.
        """
        X2, sq = _as2d(X)
        if self.shape[0] * X2.shape[1] <= DENSE_GUARD:
            Y = self.matvec(X2)
            q = (Y * Y).sum(axis=0)
        else:
            q = (X2 * (self.gram_array() @ X2)).sum(axis=0)
        return float(q[0]) if sq else q


class IdentityBlock(Identity, Block):
    """One query per cell."""

    name = "identity"
    help = "one count per value"

    def gram_array(self) -> np.ndarray:
        return np.eye(self.n)

    def gram_eigenvalues(self) -> np.ndarray:
        return np.ones(self.n)

    def gram(self) -> Matrix:
        return Identity(self.n)


class TotalBlock(Ones, Block):
    """The single query that counts every cell."""

    name = "total"
    help = "a single count over all values"

    def __init__(self, n: int) -> None:
        super().__init__(1, n)

    def gram_array(self) -> np.ndarray:
        return np.ones((self.n, self.n))

    def gram_eigenvalues(self) -> np.ndarray:
        out = np.zeros(self.n)
        out[-1] = self.n
        return out

    def gram(self) -> Matrix:
        return Ones(self.n, self.n)


class PrefixBlock(Block):
    """Row a counts cells ``[0, a]`` (the empirical CDF); needs an ordered attribute."""

    name = "prefix"
    help = "counts of values <= v for every v (a CDF); ordered attributes"

    def __init__(self, n: int) -> None:
        self.n = int(n)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    def matvec(self, x):
        x2, sq = _as2d(x)
        return _out(np.cumsum(x2, axis=0), sq)

    def rmatvec(self, y):
        y2, sq = _as2d(y)
        return _out(np.cumsum(y2[::-1], axis=0)[::-1], sq)

    def dense(self) -> np.ndarray:
        return np.tril(np.ones((self.n, self.n)))

    def gram_array(self) -> np.ndarray:
        i = np.arange(self.n)
        return (self.n - np.maximum.outer(i, i)).astype(float)

    def gram_eigenvalues(self) -> np.ndarray:
        return _prefix_eigenvalues(self.n)

    def column_norms(self, p: int) -> np.ndarray:
        c = (self.n - np.arange(self.n)).astype(float)
        return c if p == 1 else np.sqrt(c)

    def fro2(self) -> float:
        return self.n * (self.n + 1) / 2


class SuffixBlock(Block):
    """Row a counts cells ``[a, n-1]``."""

    name = "suffix"
    help = "counts of values >= v for every v; ordered attributes"

    def __init__(self, n: int) -> None:
        self.n = int(n)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    def matvec(self, x):
        x2, sq = _as2d(x)
        return _out(np.cumsum(x2[::-1], axis=0)[::-1], sq)

    def rmatvec(self, y):
        y2, sq = _as2d(y)
        return _out(np.cumsum(y2, axis=0), sq)

    def dense(self) -> np.ndarray:
        return np.triu(np.ones((self.n, self.n)))

    def gram_array(self) -> np.ndarray:
        i = np.arange(self.n)
        return (np.minimum.outer(i, i) + 1).astype(float)

    def gram_eigenvalues(self) -> np.ndarray:
        # the suffix block is the prefix block with its cells reversed
        return _prefix_eigenvalues(self.n)

    def column_norms(self, p: int) -> np.ndarray:
        c = (np.arange(self.n) + 1).astype(float)
        return c if p == 1 else np.sqrt(c)

    def fro2(self) -> float:
        return self.n * (self.n + 1) / 2


class AllRangeBlock(Block):
    """All n(n+1)/2 ranges ``[a, b]``, rows ordered by a then b."""

    name = "all_range"
    help = "every interval [a, b]; ordered attributes"

    def __init__(self, n: int) -> None:
        self.n = int(n)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n * (self.n + 1) // 2, self.n)

    def matvec(self, x):
        x2, sq = _as2d(x)
        cs = _csum(x2)
        a, b = np.triu_indices(self.n)
        return _out(cs[b + 1] - cs[a], sq)

    def rmatvec(self, y):
        y2, sq = _as2d(y)
        n = self.n
        a, b = np.triu_indices(n)
        out = np.empty((n, y2.shape[1]))
        for k in range(y2.shape[1]):
            Y = np.zeros((n, n))
            Y[a, b] = y2[:, k]
            # x_j = sum_{a <= j <= b} Y[a, b]
            S = np.cumsum(Y[:, ::-1], axis=1)[:, ::-1]  # S[a, j] = sum_{b >= j} Y[a, b]
            out[:, k] = np.triu(S).sum(axis=0)
        return _out(out, sq)

    def dense(self) -> np.ndarray:
        self.check_dense()
        a, b = np.triu_indices(self.n)
        j = np.arange(self.n)
        return ((j >= a[:, None]) & (j <= b[:, None])).astype(float)

    def gram_array(self) -> np.ndarray:
        i = np.arange(self.n)
        return ((np.minimum.outer(i, i) + 1) * (self.n - np.maximum.outer(i, i))).astype(float)

    def gram_eigenvalues(self) -> np.ndarray:
        # W^T W = (n+1) T^-1 with T = tridiag(-1, 2, -1), whose eigenvalues are
        # 4 sin^2(k pi / (2n+2)), k = 1..n
        k = np.arange(self.n, 0, -1)
        return (self.n + 1) / (4.0 * np.sin(k * np.pi / (2 * self.n + 2)) ** 2)

    def gram_quadratic(self, X: np.ndarray) -> np.ndarray | float:
        # A range [a, b] answers S[b+1] - S[a] on the n+1 prefix sums S of x, so the sum of
        # squared answers over all ranges is the sum of squared pairwise differences of S,
        # (n+1) * sum (S - mean S)^2: O(n) per column instead of O(n^2) answers.
        X2, sq = _as2d(X)
        S = _csum(X2)
        S -= S.mean(axis=0, keepdims=True)
        q = (self.n + 1) * (S * S).sum(axis=0)
        return float(q[0]) if sq else q

    def column_norms(self, p: int) -> np.ndarray:
        j = np.arange(self.n)
        c = ((j + 1) * (self.n - j)).astype(float)
        return c if p == 1 else np.sqrt(c)

    def fro2(self) -> float:
        n = self.n
        return n * (n + 1) * (n + 2) / 6


class WidthRangeBlock(Block):
    """All n-k+1 ranges ``[a, a+k-1]`` of width k."""

    name = "range"
    options = ("width",)
    help = "every interval of a fixed width (option: width)"

    def __init__(self, n: int, width: int) -> None:
        self.n, self.width = int(n), int(width)
        if not 1 <= self.width <= self.n:
            raise ValueError(f"width must lie in 1..{self.n}, got {width}")

    @classmethod
    def from_options(cls, options: Mapping[str, Any], n: int, where: str) -> Block:
        if "width" not in options:
            raise SpecError(f"{where}.width: missing (block 'range' needs a width)")
        return cls(n, integer(options["width"], f"{where}.width", 1, n))

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n - self.width + 1, self.n)

    def matvec(self, x):
        x2, sq = _as2d(x)
        cs = _csum(x2)
        k = self.width
        return _out(cs[k:] - cs[:-k], sq)

    def rmatvec(self, y):
        y2, sq = _as2d(y)
        cs = _csum(y2)  # x_j = sum_{a = max(0, j-k+1)}^{min(j, n-k)} y_a
        j = np.arange(self.n)
        lo = np.maximum(0, j - self.width + 1)
        hi = np.minimum(j, self.n - self.width)
        return _out(cs[hi + 1] - cs[lo], sq)

    def dense(self) -> np.ndarray:
        a = np.arange(self.shape[0])[:, None]
        j = np.arange(self.n)
        return ((j >= a) & (j < a + self.width)).astype(float)

    def gram_array(self) -> np.ndarray:
        i = np.arange(self.n)
        lo = np.maximum(0, np.maximum.outer(i, i) - self.width + 1)
        hi = np.minimum(np.minimum.outer(i, i), self.n - self.width)
        return np.maximum(0, hi - lo + 1).astype(float)

    def gram_eigenvalues(self) -> np.ndarray:
        u = self.width - 1  # the Gram is banded: cells further apart share no range
        if 4 * u >= self.n:
            return np.linalg.eigvalsh(self.gram_array())
        band = np.zeros((u + 1, self.n))
        for t in range(u + 1):  # superdiagonal t holds entries (i, i + t)
            i = np.arange(self.n - t)
            lo = np.maximum(0, i + t - self.width + 1)
            hi = np.minimum(i, self.n - self.width)
            band[u - t, t:] = np.maximum(0, hi - lo + 1)
        return sla.eigvals_banded(band, lower=False, check_finite=False)

    def column_norms(self, p: int) -> np.ndarray:
        # cell j lies in the ranges starting at max(0, j-k+1) .. min(j, n-k)
        j = np.arange(self.n)
        c = (np.minimum(j, self.n - self.width) - np.maximum(0, j - self.width + 1) + 1
             ).astype(float)
        return c if p == 1 else np.sqrt(c)

    def fro2(self) -> float:
        return float(self.width * (self.n - self.width + 1))

    def spec(self) -> Any:
        return {"block": self.name, "width": self.width}


class CircularRangeBlock(Block):
    """Ranges on a circular domain (e.g. hour of day).

    With ``width`` k: the n windows ``{a, a+1, ..., a+k-1} mod n``. Without: every circular
    window of every width 1..n-1 starting at every cell, plus the full range once.
    """

    name = "circular_range"
    options = ("width",)
    help = "intervals that wrap around (e.g. hour of day); option: width"

    def __init__(self, n: int, width: int | None = None) -> None:
        self.n = int(n)
        self.width = None if width is None else int(width)
        if self.width is not None and not 1 <= self.width <= self.n:
            raise ValueError(f"width must lie in 1..{self.n}, got {width}")

    @classmethod
    def from_options(cls, options: Mapping[str, Any], n: int, where: str) -> Block:
        width = options.get("width")
        return cls(n, None if width is None else integer(width, f"{where}.width", 1, n))

    def _widths(self) -> list[int]:
        return [self.width] if self.width is not None else list(range(1, self.n))

    @property
    def shape(self) -> tuple[int, int]:
        if self.width is not None:
            return (self.n, self.n)
        return (self.n * (self.n - 1) + 1, self.n)

    def _window_sums(self, x2: np.ndarray, k: int) -> np.ndarray:
        ext = np.concatenate([x2, x2[: k - 1]]) if k > 1 else x2
        cs = _csum(ext)
        return cs[k:k + self.n] - cs[:self.n]

    def matvec(self, x):
        x2, sq = _as2d(x)
        parts = [self._window_sums(x2, k) for k in self._widths()]
        if self.width is None:
            parts.append(x2.sum(axis=0, keepdims=True))
        return _out(np.concatenate(parts), sq)

    def rmatvec(self, y):
        y2, sq = _as2d(y)
        out = np.zeros((self.n, y2.shape[1]))
        pos = 0
        for k in self._widths():
            ya = y2[pos:pos + self.n]
            pos += self.n
            # cell j is in windows starting at j-k+1 .. j (mod n)
            ext = np.concatenate([ya[self.n - k + 1:], ya]) if k > 1 else ya
            cs = _csum(ext)
            out += cs[k:k + self.n] - cs[:self.n]
        if self.width is None:
            out += y2[pos:pos + 1]
        return _out(out, sq)

    def _gram_column(self) -> np.ndarray:
        """First column of the (circulant) Gram: windows shared by cells 0 and d."""
        d = np.arange(self.n)
        c = np.zeros(self.n)
        for k in self._widths():
            c += np.maximum(0, k - d) + np.maximum(0, k - (self.n - d)) * (d > 0)
        if self.width is None:
            c += 1.0
        return c

    def gram_array(self) -> np.ndarray:
        i = np.arange(self.n)
        return self._gram_column()[(i[None, :] - i[:, None]) % self.n]

    def gram_eigenvalues(self) -> np.ndarray:
        # a symmetric circulant is diagonalised by the DFT: eigenvalues = fft of a column
        return np.sort(np.fft.fft(self._gram_column()).real)

    def gram_quadratic(self, X: np.ndarray) -> np.ndarray | float:
        X2, sq = _as2d(X)
        lam = np.fft.fft(self._gram_column()).real
        q = (lam[:, None] * np.abs(np.fft.fft(X2, axis=0)) ** 2).sum(axis=0) / self.n
        return float(q[0]) if sq else q

    def column_norms(self, p: int) -> np.ndarray:
        # every cell lies in the same number of windows (the Gram is circulant)
        c = np.full(self.n, self._gram_column()[0])
        return c if p == 1 else np.sqrt(c)

    def fro2(self) -> float:
        return float(self.n * self._gram_column()[0])

    def spec(self) -> Any:
        return self.name if self.width is None else {"block": self.name, "width": self.width}


class PermutedBlock(Block):
    """Another block with its columns permuted: ``W[:, perm]`` (HDMM's permuted range)."""

    name = "permuted"
    options = ("of", "seed")
    help = "another block with its values shuffled (options: of, seed)"

    def __init__(self, base: Block, seed: int) -> None:
        self.base, self.seed = base, int(seed)
        self.n = base.shape[1]
        self.perm = np.random.RandomState(self.seed).permutation(self.n)

    @classmethod
    def from_options(cls, options: Mapping[str, Any], n: int, where: str) -> Block:
        if "of" not in options:
            raise SpecError(f"{where}.of: missing (the block to permute)")
        base = Block.from_spec(options["of"], n, f"{where}.of")
        return cls(base, integer(options.get("seed", 0), f"{where}.seed", 0))

    @property
    def shape(self) -> tuple[int, int]:
        return self.base.shape

    def matvec(self, x):
        x = np.asarray(x, dtype=float)
        z = np.empty_like(x)
        z[self.perm] = x
        return self.base.matvec(z)

    def rmatvec(self, y):
        return self.base.rmatvec(y)[self.perm]

    def dense(self) -> np.ndarray:
        return self.base.dense()[:, self.perm]

    def gram_array(self) -> np.ndarray:
        return self.base.gram_array()[np.ix_(self.perm, self.perm)]

    def gram_eigenvalues(self) -> np.ndarray:
        return self.base.gram_eigenvalues()

    def gram_quadratic(self, X: np.ndarray) -> np.ndarray | float:
        X = np.asarray(X, dtype=float)
        Z = np.empty_like(X)
        Z[self.perm] = X
        return self.base.gram_quadratic(Z)

    def column_norms(self, p: int) -> np.ndarray:
        return self.base.column_norms(p)[self.perm]

    def fro2(self) -> float:
        return self.base.fro2()

    def spec(self) -> Any:
        return {"block": self.name, "of": self.base.spec(), "seed": self.seed}


class MatrixBlock(Dense, Block):
    """Explicit rows over the attribute's cells."""

    name = "matrix"
    options = ("rows",)
    help = "explicit 0/1 (or weighted) rows over the values (option: rows)"

    def __init__(self, rows: Any) -> None:
        super().__init__(np.asarray(rows, dtype=float))
        self.n = self.shape[1]

    @classmethod
    def from_options(cls, options: Mapping[str, Any], n: int, where: str) -> Block:
        if "rows" not in options:
            raise SpecError(f"{where}.rows: missing (block 'matrix' needs rows)")
        return cls(row_array(options["rows"], f"{where}.rows", n))

    def spec(self) -> Any:
        return {"block": self.name, "rows": self.array.tolist()}

    def gram_array(self) -> np.ndarray:
        return self.array.T @ self.array

    def gram(self) -> Matrix:
        return Dense(self.gram_array())


def _prefix_eigenvalues(n: int) -> np.ndarray:
    """Squared singular values of the n x n prefix matrix, ``1 / (4 sin^2((2k-1) pi/(4n+2)))``."""
    k = np.arange(n, 0, -1)
    return 1.0 / (4.0 * np.sin((2 * k - 1) * np.pi / (4 * n + 2)) ** 2)


def random_predicates(n: int, count: int, p: float, seed: int) -> np.ndarray:
    """``count`` random 0/1 predicates over n cells, each cell included with probability p.

    Empty rows are redrawn so every query counts something.
    """
    rng = np.random.default_rng(seed)
    rows = rng.random((count, n)) < p
    empty = ~rows.any(axis=1)
    while empty.any():
        rows[empty] = rng.random((int(empty.sum()), n)) < p
        empty = ~rows.any(axis=1)
    return rows.astype(float)


class RandomBlock(MatrixBlock):
    """``count`` random predicates over the cells (see :func:`random_predicates`)."""

    name = "random"
    options = ("count", "p", "seed")
    help = "random subsets of values (options: count, p, seed)"

    def __init__(self, n: int, count: int, p: float, seed: int) -> None:
        super().__init__(random_predicates(n, count, p, seed))
        self.count, self.p, self.seed = int(count), float(p), int(seed)

    @classmethod
    def from_options(cls, options: Mapping[str, Any], n: int, where: str) -> Block:
        count = explicit_rows(integer(options.get("count", n), f"{where}.count", 1, 1_000_000),
                              n, f"{where}.count")
        p = number(options.get("p", 0.5), f"{where}.p", 0.0, 1.0, open_lo=True)
        return cls(n, count, p, integer(options.get("seed", 0), f"{where}.seed", 0))

    def spec(self) -> Any:
        return {"block": self.name, "count": self.count, "p": self.p, "seed": self.seed}


class IdentityTotalBlock(Block):
    """One query per cell and then the total: ``[I; T]`` (HDMM's IdentityTotal, n+1 rows).

    SF1+ asks every census table per state and nationally with this block on ``state``.
    """

    name = "identity_total"
    help = "one count per value, plus the total over all values"

    def __init__(self, n: int) -> None:
        self.n = int(n)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n + 1, self.n)

    def matvec(self, x):
        x2, sq = _as2d(x)
        return _out(np.concatenate([x2, x2.sum(axis=0, keepdims=True)]), sq)

    def rmatvec(self, y):
        y2, sq = _as2d(y)
        return _out(y2[:-1] + y2[-1:], sq)

    def dense(self) -> np.ndarray:
        return np.vstack([np.eye(self.n), np.ones((1, self.n))])

    def gram_array(self) -> np.ndarray:
        return np.eye(self.n) + 1.0

    def gram_eigenvalues(self) -> np.ndarray:
        # I + 1 1^T: eigenvalue n + 1 along the ones vector, 1 on its complement
        out = np.ones(self.n)
        out[-1] = self.n + 1.0
        return out

    def column_norms(self, p: int) -> np.ndarray:
        return np.full(self.n, 2.0 if p == 1 else np.sqrt(2.0))

    def fro2(self) -> float:
        return 2.0 * self.n


#: Every block by its spec name, in the order error messages and menus list them.
BLOCKS: dict[str, type[Block]] = {cls.name: cls for cls in (
    IdentityBlock, TotalBlock, PrefixBlock, SuffixBlock, AllRangeBlock, WidthRangeBlock,
    CircularRangeBlock, PermutedBlock, RandomBlock, MatrixBlock, IdentityTotalBlock)}
