"""Heat maps of matrices (workloads, strategies, reconstruction maps) with hover values.

A matrix is drawn as an image: one row per query or measurement, one column per data cell
(or per value of an attribute), colour = the entry. Images stay fast for matrices with
millions of entries, unlike one rectangle per entry; matrices above :data:`MAX_ENTRIES` are
not drawn at all (the caller says why instead).
"""

from __future__ import annotations

from collections.abc import Sequence

import holoviews as hv
import numpy as np

hv.extension("bokeh", logo=False)

#: Largest matrix (rows x columns) drawn as a heat map.
MAX_ENTRIES = 4_000_000


def too_big(shape: Sequence[int]) -> str:
    """'' when a matrix of ``shape`` can be drawn, else a one-line reason."""
    rows, cols = int(shape[0]), int(shape[1])
    if rows * cols > MAX_ENTRIES:
        return (f"a {rows:,} x {cols:,} matrix is too large to draw "
                f"(limit {MAX_ENTRIES:,} entries)")
    return ""


def matrix_heatmap(array: np.ndarray, title: str, xlabel: str = "data cell",
                   ylabel: str = "query", height: int | None = None,
                   cmap: str | None = None) -> hv.Image:
    """The matrix as an image (row 0 at the top), with the entry under the mouse on hover.

    Non-negative matrices use viridis (as in the HDMM paper's strategy pictures); matrices
    with negative entries use a diverging map centred on zero, so sign is visible.
    """
    A = np.asarray(array, dtype=float)
    if A.ndim == 1:
        A = A[None, :]
    if A.size and not np.all(np.isfinite(A)):
        A = np.where(np.isfinite(A), A, np.nan)
    rows, cols = A.shape
    lo = float(np.nanmin(A)) if A.size else 0.0
    hi = float(np.nanmax(A)) if A.size else 1.0
    if cmap is None:
        cmap = "RdBu_r" if lo < 0 else "viridis"
    if cmap == "RdBu_r":
        edge = max(abs(lo), abs(hi)) or 1.0
        clim = (-edge, edge)
    else:
        clim = (lo, hi if hi > lo else lo + 1.0)
    image = hv.Image(
        (np.arange(cols), np.arange(rows), A),
        kdims=[hv.Dimension("column", label=xlabel), hv.Dimension("row", label=ylabel)],
        vdims=[hv.Dimension("value", label="entry")],
    )
    if height is None:
        height = int(min(520, max(160, 60 + 6 * rows if rows < 60 else 420)))
    return image.opts(
        cmap=cmap, clim=clim, colorbar=True, invert_yaxis=True, tools=["hover", "save"],
        shared_axes=False,
        title=title, height=height, responsive=True,
        default_tools=["pan", "wheel_zoom", "box_zoom", "reset"],
    )
