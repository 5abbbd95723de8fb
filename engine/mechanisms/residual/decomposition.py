"""Query decomposition into mutually orthogonal residual sub-workloads (spec 3.2).

A query q over the marginal on attribute set A splits into one sub-query per subset A' of A::

    q_{=>A'} = q (W_1 kron ... kron W_l),  W_j = C_d = I - J/d   if attribute j is in A'
                                          W_j = (1/d) 1_d         otherwise

(tensor recipe: average q over the axes outside A', then centre it along every remaining
axis). Sub-queries of different residuals are orthogonal and ``q x_A = sum_{A'} q_{=>A'}
x_{A'}``, so each residual's sub-workload can be optimised on its own.

What the optimiser needs from residual A' is its Gram ``G_{A'} = sum_q w(q) q_{=>A'}^T
q_{=>A'}``. It is kept as a weighted sum of *pieces*, each either a Kronecker product of 1-D
centred Grams (from product queries: ``C W_i^T W_i C`` per attribute) or one dense Gram (from
non-product queries such as affine or abs_diff, stored as a row factor R with ``G = R^T R`` and
at most min(queries, cells) rows, so that a low-rank Gram over many cells is never formed),
every piece normalised to trace 1 and interned by content. Identical pieces merge, so a
residual whose pieces all share one Kronecker Gram is recognised exactly (the Kronecker
shortcut, spec R7) and residuals with equal normalised pieces are recognised as the same
sub-problem without ever forming a c x c matrix.

Weights: an engine term's ``weight`` multiplies its query rows, so each of its queries counts
``weight**2`` in squared error; that is the QuerySmasher weight ``w(q)`` (Appendix E), copied
unchanged to every sub-query.

Example (spec R1, the worked example of Figures 1-2):
    >>> import numpy as np
    >>> q = np.array([[0, 1, 1, 0, 0, 1]], dtype=float)
    >>> subquery(q, (2, 3), (0,)).round(4).tolist()
    [[0.1667, -0.1667]]
    >>> subquery(q, (2, 3), ()).tolist()
    [[0.5]]
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.errors import NotApplicable
from engine.linalg.matrix import DENSE_GUARD, Matrix
from engine.linalg.residuals import AttrSet, subsets
from engine.mechanisms.residual.optimal import ClassFactor
from engine.progress import Progress, report
from engine.workloads.blocks import Block
from engine.workloads.term import Term
from engine.workloads.workload import Workload

#: A piece's identity inside a residual: ("kron", one Gram key per attribute) or
#: ("dense", (one Gram key,)).
PieceKey = tuple[str, tuple[str, ...]]
#: Pieces with a trace below this fraction of their term's squared norm count as zero.
ZERO = 1e-13


def subquery(rows: np.ndarray, sizes: Sequence[int], keep: Sequence[int]) -> np.ndarray:
    """``q_{=>A'}`` for a batch of query rows (Eq. 3, tensor recipe).

    Args:
        rows: m x prod(sizes) queries over a marginal (C order).
        sizes: the marginal's attribute sizes.
        keep: positions (axes of the marginal) of the attributes in A'.

    Returns:
        m x prod(sizes[keep]) sub-queries over the marginal on A' (m x 1 when keep is empty).
    """
    rows = np.asarray(rows, dtype=float)
    t = rows.reshape((rows.shape[0],) + tuple(sizes))
    drop = tuple(1 + a for a in range(len(sizes)) if a not in keep)
    if drop:
        t = t.mean(axis=drop)
    for ax in range(1, t.ndim):
        t = t - t.mean(axis=ax, keepdims=True)
    return t.reshape(rows.shape[0], -1)


def residual_projector(sizes: Sequence[int], keep: Sequence[int]) -> np.ndarray:
    """The Eq. 3 matrix ``Q_{A'} = kron_j (C_d if j in keep else (1/d) 1_d)`` (small cases).

    ``q_{=>A'} = q @ Q_{A'}``; it has prod(sizes) rows and prod(sizes[keep]) columns.
    """
    out = np.ones((1, 1))
    for ax, d in enumerate(sizes):
        W = np.eye(d) - 1.0 / d if ax in keep else np.full((d, 1), 1.0 / d)
        out = np.kron(out, W)
    return out


def centre_gram(G: np.ndarray) -> np.ndarray:
    """``C G C`` with ``C = I - J/d``: the Gram of the centred rows."""
    G = np.asarray(G, dtype=float)
    G = G - G.mean(axis=0, keepdims=True)
    return G - G.mean(axis=1, keepdims=True)


class GramStore:
    """Content-addressed store of trace-normalised Grams and Gram row factors.

    ``add(G)`` interns a Gram ``G / tr(G)``, ``add_factor(R)`` a row factor ``R / ||R||_F``
    (standing for the Gram ``R^T R``); both return ``(key, trace)``. Equal normalised contents
    (to 12 decimals) share one key and one stored array, which is what lets identical residual
    sub-problems be found and solved once.
    """

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}
        #: row-factor key -> ``(labels, class rows)`` when the factor's cells fall into few
        #: classes before centring (see ``ClassFactor``).
        self.classes: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _intern(self, normed: np.ndarray, tag: str) -> str:
        digest = hashlib.blake2b(np.round(normed, 12).tobytes(), digest_size=12)
        digest.update(f"{tag}{normed.shape}".encode())
        key = digest.hexdigest()
        self._arrays.setdefault(key, normed)
        return key

    def add(self, G: np.ndarray) -> tuple[str, float]:
        """Intern ``G / tr(G)``; G must have a positive trace."""
        trace = float(np.trace(G))
        return self._intern(np.asarray(G, dtype=float) / trace, "gram"), trace

    def add_factor(self, R: np.ndarray) -> tuple[str, float]:
        """Intern the row factor ``R / ||R||_F`` of the Gram ``R^T R`` (trace ``||R||_F^2``)."""
        trace = float((R * R).sum())
        return self._intern(np.asarray(R, dtype=float) / math.sqrt(trace), "rows"), trace

    def __getitem__(self, key: str) -> np.ndarray:
        return self._arrays[key]

    def __len__(self) -> int:
        return len(self._arrays)


@dataclass
class ResidualWorkload:
    """The sub-workload of one residual A': its Gram as a sum of interned pieces.

    Attributes:
        attrs: the residual's attribute set (axis tuple, domain order).
        sizes: sizes of those attributes.
        pieces: ``(kind, Gram keys) -> [weighted coefficient, unweighted coefficient]``; the
            Gram is ``sum coef * piece`` with every piece of trace 1.
        rows: number of sub-queries filed here (including repeats).
    """

    attrs: AttrSet
    sizes: tuple[int, ...]
    pieces: dict[PieceKey, list[float]] = field(default_factory=dict)
    rows: int = 0

    def add(self, key: PieceKey, coef: float, coef_unweighted: float, rows: int) -> None:
        """Accumulate one piece (merging with an identical one)."""
        slot = self.pieces.setdefault(key, [0.0, 0.0])
        slot[0] += coef
        slot[1] += coef_unweighted
        self.rows += rows

    @property
    def cells(self) -> int:
        """Cells of the marginal on A' (the sub-problem's dimension c)."""
        return math.prod(self.sizes)

    @property
    def trace(self) -> float:
        """``tr G_{A'}`` (weighted): the residual planner's ``v_{A'}``."""
        return float(sum(c for c, _ in self.pieces.values()))

    @property
    def trace_unweighted(self) -> float:
        """``tr`` of the unweighted sub-workload Gram."""
        return float(sum(c for _, c in self.pieces.values()))

    def single_kron(self) -> tuple[tuple[str, ...], float] | None:
        """``(factor keys, coefficient)`` when the Gram is one Kronecker product, else None."""
        if len(self.pieces) == 1:
            (kind, keys), (coef, _) = next(iter(self.pieces.items()))
            if kind == "kron":
                return keys, coef
        return None

    def signature(self) -> tuple:
        """Identifies the normalised sub-problem: residuals with equal signatures have
        proportional Grams (same optimal strategy, losses scaled by ``trace``)."""
        total = self.trace
        return (self.sizes, tuple(sorted((kind, keys, round(c / total, 10))
                                         for (kind, keys), (c, _) in self.pieces.items())))

    def dense_gram(self, store: GramStore, weighted: bool = True) -> np.ndarray:
        """The c x c Gram (refused above the dense size guard)."""
        c = self.cells
        if c * c > DENSE_GUARD:
            raise NotApplicable(f"residual over {c:,} cells is too large for an explicit "
                                f"{c:,} x {c:,} Gram")
        G = np.zeros((c, c))
        for (kind, keys), coefs in self.pieces.items():
            G += coefs[0 if weighted else 1] * piece_gram(store, kind, keys)
        return G

    def factor_rank(self, store: GramStore) -> int:
        """Columns of ``gram_factor``: the sum of the pieces' factor ranks."""
        total = 0
        for kind, keys in self.pieces:
            if kind == "dense":
                total += store[keys[0]].shape[0]
            else:
                total += math.prod(int(np.linalg.matrix_rank(store[k])) for k in keys)
        return total

    def class_factor(self, store: GramStore) -> ClassFactor | None:
        """The Gram in class form (every piece dense with few cell classes), else None;
        like ``gram_factor`` it is the weighted Gram (not normalised)."""
        pieces = []
        for (kind, keys), (coef, _) in self.pieces.items():
            if kind != "dense" or keys[0] not in store.classes:
                return None
            labels, rows = store.classes[keys[0]]
            pieces.append((labels, math.sqrt(coef) * rows))
        return ClassFactor(self.sizes, tuple(pieces))

    def gram_factor(self, store: GramStore) -> np.ndarray:
        """A c x k matrix F with ``F F^T = G`` (weighted), built from the pieces' factors."""
        blocks = []
        for (kind, keys), (coef, _) in self.pieces.items():
            if kind == "dense":
                blocks.append(math.sqrt(coef) * store[keys[0]].T)
            else:
                F = np.ones((1, 1))
                for key in keys:
                    F = np.kron(F, _psd_factor(store[key]))
                blocks.append(math.sqrt(coef) * F)
        return np.hstack(blocks)


def _psd_factor(G: np.ndarray) -> np.ndarray:
    """F (d x r) with ``F F^T = G`` for a small PSD matrix."""
    w, U = np.linalg.eigh((G + G.T) / 2.0)
    keep = w > 1e-12 * max(float(w.max()), 1e-300)
    return U[:, keep] * np.sqrt(w[keep])


def piece_gram(store: GramStore, kind: str, keys: tuple[str, ...]) -> np.ndarray:
    """The explicit (trace-1) Gram of one piece."""
    if kind == "dense":
        R = store[keys[0]]
        return R.T @ R
    out = np.ones((1, 1))
    for key in keys:
        out = np.kron(out, store[key])
    return out


@dataclass
class Decomposition:
    """Every non-empty residual sub-workload of a workload.

    Attributes:
        shape: sizes of every domain attribute.
        residuals: residual attribute set -> its sub-workload (only non-zero ones).
        store: the interned piece Grams.
        num_queries: number of workload queries.
        seconds: time spent decomposing.
    """

    shape: tuple[int, ...]
    residuals: dict[AttrSet, ResidualWorkload]
    store: GramStore
    num_queries: int
    seconds: float = 0.0

    def __iter__(self) -> Iterator[ResidualWorkload]:
        return iter(self.residuals.values())


class _FactorInfo:
    """Per-block data of a product factor: mean-part norm s, centred Gram key and trace."""

    __slots__ = ("key", "mean2", "trace")

    def __init__(self, key: str | None, mean2: float, trace: float) -> None:
        self.key, self.mean2, self.trace = key, mean2, trace


def _gram_array(f: Matrix) -> np.ndarray:
    return f.gram_array() if isinstance(f, Block) else f.gram().dense()


def _block_fingerprint(f: Matrix) -> tuple | None:
    if isinstance(f, Block):
        return (type(f).__name__, f.shape, repr(f.spec()))
    return None


class Decomposer:
    """Turns workload terms into residual pieces, caching per block and per dense query."""

    def __init__(self, shape: Sequence[int]) -> None:
        self.shape = tuple(shape)
        self.store = GramStore()
        self.residuals: dict[AttrSet, ResidualWorkload] = {}
        self._factors: dict[tuple, _FactorInfo] = {}
        # the same block object is usually shared by many terms: skip its fingerprint
        self._by_object: dict[int, tuple[Matrix, _FactorInfo]] = {}
        self._dense: dict[str, list[tuple[tuple[int, ...], PieceKey, float]]] = {}

    def _residual(self, attrs: AttrSet) -> ResidualWorkload:
        res = self.residuals.get(attrs)
        if res is None:
            res = ResidualWorkload(attrs, tuple(self.shape[i] for i in attrs))
            self.residuals[attrs] = res
        return res

    def factor_info(self, f: Matrix) -> _FactorInfo:
        """Mean part ``||W 1/d||^2`` and the interned centred Gram of one 1-D factor."""
        known = self._by_object.get(id(f))
        if known is not None and known[0] is f:
            return known[1]
        info = self._factor_info(f)
        self._by_object[id(f)] = (f, info)
        return info

    def _factor_info(self, f: Matrix) -> _FactorInfo:
        fp = _block_fingerprint(f)
        if fp is not None and fp in self._factors:
            return self._factors[fp]
        raw = _gram_array(f)
        d = raw.shape[0]
        mean2 = float(raw.sum()) / d**2
        Gc = centre_gram(raw)
        trace = float(np.trace(Gc))
        key = None
        if trace > ZERO * float(np.trace(raw)):
            key, trace = self.store.add(Gc)
        else:
            trace = 0.0
        info = _FactorInfo(key, mean2, trace)
        if fp is not None:
            self._factors[fp] = info
        return info

    def add_term(self, term: Term, qs_weight: float) -> None:
        """File every sub-query of ``term`` (QuerySmasher weight ``qs_weight`` per query)."""
        if qs_weight == 0:
            return
        if term.is_product:
            self._add_product(term, qs_weight)
        else:
            self._add_dense(term, qs_weight)

    def _add_product(self, term: Term, w: float) -> None:
        infos = [self.factor_info(f) for f in term.factors or ()]
        attrs = term.attrs
        for keep in subsets(tuple(range(len(attrs)))):
            coef = 1.0
            keys = []
            for pos, info in enumerate(infos):
                if pos in keep:
                    if info.key is None:
                        coef = 0.0
                        break
                    coef *= info.trace
                    keys.append(info.key)
                else:
                    coef *= info.mean2
            if coef <= 0.0:
                continue
            sub = tuple(attrs[p] for p in keep)
            self._residual(sub).add(("kron", tuple(keys)), w * coef, coef, term.num_queries)

    def _add_dense(self, term: Term, w: float) -> None:
        rows = term.query
        m, c = rows.shape
        if m * c > DENSE_GUARD:
            raise NotApplicable(f"term {term.label!r}: {m:,} x {c:,} explicit queries exceed "
                                "the dense size guard")
        Q = rows.dense()
        digest = hashlib.blake2b(np.ascontiguousarray(Q).tobytes(), digest_size=12)
        digest.update(repr((Q.shape, term.marginal_shape)).encode())
        fp = digest.hexdigest()
        if fp not in self._dense:
            self._dense[fp] = self._dense_pieces(Q, term.marginal_shape)
        for keep, key, coef in self._dense[fp]:
            sub = tuple(term.attrs[p] for p in keep)
            self._residual(sub).add(key, w * coef, coef, m)

    def _dense_pieces(self, Q: np.ndarray, sizes: tuple[int, ...]
                      ) -> list[tuple[tuple[int, ...], PieceKey, float]]:
        norm2 = float((Q * Q).sum())
        out = []
        for keep in subsets(tuple(range(len(sizes)))):
            S = subquery(Q, sizes, keep)
            trace = float((S * S).sum())
            if trace <= ZERO * norm2:
                continue  # every sub-query is zero: this residual needs no mechanism
            if len(keep) == 0:
                out.append((keep, ("kron", ()), trace))
                continue
            if len(keep) == 1:
                # one-attribute pieces are (trivially) Kronecker: they merge with product ones
                key, trace = self.store.add(S.T @ S)
                out.append((keep, ("kron", (key,)), trace))
                continue
            classes = cell_classes(_marginal_rows(Q, sizes, keep))
            if S.shape[0] > S.shape[1]:  # more sub-queries than cells: compress the rows
                w, U = np.linalg.eigh(S.T @ S)
                keep_w = w > 1e-12 * w.max()
                S = (U[:, keep_w] * np.sqrt(w[keep_w])).T
            key, trace = self.store.add_factor(S)
            if classes is not None and key not in self.store.classes:
                labels, rows = classes
                self.store.classes[key] = (labels, rows / math.sqrt(trace))
            out.append((keep, ("dense", (key,)), trace))
        return out


def _marginal_rows(Q: np.ndarray, sizes: Sequence[int], keep: Sequence[int]) -> np.ndarray:
    """The query rows averaged over the axes outside ``keep`` (not centred)."""
    t = Q.reshape((Q.shape[0],) + tuple(sizes))
    drop = tuple(1 + a for a in range(len(sizes)) if a not in keep)
    return (t.mean(axis=drop) if drop else t).reshape(Q.shape[0], -1)


def cell_classes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(labels, class rows)`` when the cells (columns of ``rows``) take at most a quarter
    as many distinct columns as there are cells: ``rows[:, x] = class_rows[labels[x]]``
    (class_rows: classes x queries, compressed to its rank when the queries outnumber the
    classes); else None. Columns are grouped by a random projection and the grouping is
    checked exactly."""
    c = rows.shape[1]
    probe = np.random.default_rng(0).standard_normal(rows.shape[0]) @ rows
    _, first, labels = np.unique(np.round(probe, 9), return_index=True, return_inverse=True)
    labels = labels.ravel()
    if 4 * len(first) > c or not np.array_equal(rows[:, first][:, labels], rows):
        return None
    class_rows = rows[:, first].T
    if class_rows.shape[1] > class_rows.shape[0]:
        w, U = np.linalg.eigh(class_rows @ class_rows.T)
        keep = w > 1e-12 * w.max()
        class_rows = U[:, keep] * np.sqrt(w[keep])
    return labels, class_rows


def decompose(workload: Workload, progress: Progress | None = None) -> Decomposition:
    """Decompose every term of ``workload`` into residual sub-workloads (no data access).

    Args:
        workload: any workload (every term lives on an attribute subset).
        progress: receives one report per 1,000 terms.

    Returns:
        The residual sub-workloads with non-zero Gram, keyed by attribute set.
    """
    start = time.perf_counter()
    dec = Decomposer(workload.domain.shape)
    for i, term in enumerate(workload.terms):
        dec.add_term(term, term.weight**2)
        if (i + 1) % 1000 == 0:
            report(progress, i + 1, float("nan"), f"decomposed {i + 1:,} terms")
    residuals = {a: r for a, r in sorted(dec.residuals.items(), key=lambda kv: (len(kv[0]),
                                                                               kv[0]))
                 if r.trace > 0}
    return Decomposition(dec.shape, residuals, dec.store, workload.num_queries,
                         time.perf_counter() - start)
