"""HoloViews pictures of engine objects: the one engine module that may import HoloViews.

The engine itself never needs a plotting library; the ``.plot()`` methods of
:class:`~engine.workflows.compare.Comparison` and :class:`~engine.mechanisms.base.Plan` import
this module when called, and this module imports HoloViews only inside its functions, so
``import engine`` works without it. The functions take plain numbers (arrays, records), not
engine objects, so they depend on nothing else in the engine.

Example (needs HoloViews):
    >>> bars = comparison_bars([{"mechanism": "identity", "rmse": 8.06}], bound=7.9)
    >>> type(bars).__name__
    'Overlay'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: Most pixels (rows x columns) of a strategy picture; larger strategies are drawn as block
#: means at this resolution.
IMAGE_LIMIT = (2_000, 2_000)


def holoviews() -> Any:
    """The ``holoviews`` module with its Bokeh backend registered (the options below are
    Bokeh's), without loading a notebook extension: ``hv.extension("bokeh")`` stays the
    notebook's call."""
    import holoviews as hv
    import holoviews.plotting.bokeh  # noqa: F401  (registers the backend the options are for)

    return hv


def comparison_bars(records: Sequence[Mapping[str, Any]], *, bound: float | None,
                    title: str = "RMSE per mechanism", value: str = "rmse") -> Any:
    """Bars of each mechanism's ``value`` (RMSE, people), best first, with the SVD bound as a
    dashed horizontal line.

    Args:
        records: ``{"mechanism": name, value: number or None}`` rows; rows without a number
            (not applicable) are left out.
        bound: the SVD lower bound in the same unit (None: no line).
        title: the plot title.
        value: the key of the number to draw.
    """
    hv = holoviews()

    rows = sorted(((str(r["mechanism"]), float(r[value])) for r in records
                   if r.get(value) is not None), key=lambda row: row[1])
    bars = hv.Bars(rows, kdims=["mechanism"], vdims=[value]).opts(
        title=title, xrotation=45, ylabel=f"{value} (people)", width=640, height=340,
        tools=["hover"])
    if bound is None:
        return bars * hv.HLine(0).opts(alpha=0)
    return bars * hv.HLine(bound, label="SVD bound").opts(color="black", line_dash="dashed",
                                                          line_width=2)


def strategy_image(matrix: np.ndarray, *, title: str, extent: Sequence[int] | None = None,
                   xlabel: str = "data cell", ylabel: str = "measurement") -> Any:
    """A strategy matrix as an image: one row per noisy measurement, one column per cell.

    Args:
        matrix: the entries, or block means of a larger matrix (at most
            :data:`IMAGE_LIMIT` of them: see :func:`engine.analysis.strategy_picture.block_image`).
        title: the plot title.
        extent: ``(rows, columns)`` of the whole matrix the blocks cover (default: the
            shape of ``matrix``, one pixel per entry).
        xlabel, ylabel: what a column and a row are.

    Raises:
        ValueError: for more than :data:`IMAGE_LIMIT` pixels.
    """
    hv = holoviews()

    A = np.asarray(matrix, dtype=float)
    if A.shape[0] > IMAGE_LIMIT[0] or A.shape[1] > IMAGE_LIMIT[1]:
        raise ValueError(f"strategy: {A.shape[0]:,} x {A.shape[1]:,} pixels is too large to "
                         f"draw (limit {IMAGE_LIMIT[0]:,} x {IMAGE_LIMIT[1]:,}); pass block "
                         "means")
    rows, cols = (int(s) for s in (A.shape if extent is None else extent))
    shaded = "weight" if extent is None or tuple(extent) == A.shape else "average weight size"
    image = hv.Image(A[::-1], bounds=(0, 0, cols, rows), kdims=[xlabel, ylabel],
                     vdims=[shaded])
    return image.opts(title=title, cmap="Blues", colorbar=True, width=560,
                      height=max(200, min(560, 4 * A.shape[0] + 80)), tools=["hover"])


def error_curves(table: Mapping[str, Sequence[float]], *, x: str, y: str = "rmse",
                 title: str = "") -> Any:
    """Log-log curves of ``y`` against ``x``, one per key of ``table`` (``table[name]`` holds
    the y values; ``table[x]`` the shared x values)."""
    hv = holoviews()

    xs = list(table[x])
    curves = [hv.Curve((xs, list(ys)), x, y, label=name).opts(logx=True, logy=True)
              for name, ys in table.items() if name != x]
    return hv.Overlay(curves).opts(title=title, width=640, height=360,
                                   legend_position="right")
