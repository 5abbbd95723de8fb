"""A matrix of any size as a zoomable picture: the engine's block means at screen resolution.

The HoloViz way for data too large to send: a ``DynamicMap`` on a ``RangeXY`` stream asks the
engine (``MatrixView.picture``) for the visible rows and columns aggregated into at most
:data:`PIXELS` x :data:`PIXELS` blocks, and is asked again on every zoom or pan, so a
billion-cell strategy is drawn from its implicit form and zooming in reaches single entries.
Colour is the entry where a pixel holds one entry, and the average size of the entries where
it holds many (so a sparse strategy does not fade to zero by cancelling signs), or their
average where sizes would need every entry of a large unstructured matrix.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np

from engine import BlockImage, MatrixView

hv.extension("bokeh", logo=False)

#: Blocks across and down one picture (about a screen's width).
PIXELS = 400


def colour_scale(values: np.ndarray) -> tuple[str, tuple[float, float]]:
    """A colour map and limits: diverging and centred on zero when any value is negative."""
    finite = values[np.isfinite(values)]
    lo = float(finite.min()) if finite.size else 0.0
    hi = float(finite.max()) if finite.size else 1.0
    if lo < 0:
        edge = max(-lo, hi) or 1.0
        return "RdBu_r", (-edge, edge)
    return "viridis", (lo, hi if hi > lo else lo + 1.0)


def picture_element(picture: BlockImage, xlabel: str, ylabel: str) -> hv.Image:
    """One picture as an image over its index ranges (row 0 at the top once the y axis is
    inverted), with hover values saying what a pixel means."""
    r0, r1 = int(picture.row_edges[0]), int(picture.row_edges[-1])
    c0, c1 = int(picture.col_edges[0]), int(picture.col_edges[-1])
    label = ("entry" if picture.exact else "average size of the entries"
             if picture.statistic == "mean_abs" else "average of the entries")
    image = hv.Image(np.asarray(picture.values)[::-1], bounds=(c0, r0, c1, r1),
                     kdims=[hv.Dimension("column", label=xlabel),
                            hv.Dimension("row", label=ylabel)],
                     vdims=[hv.Dimension("value", label=label)])
    cmap, clim = colour_scale(np.asarray(picture.values))
    return image.opts(cmap=cmap, clim=clim)


def zoomable_picture(view: MatrixView, height: int | None = None) -> hv.DynamicMap:
    """The view's matrix as a picture that re-renders the visible range on every zoom.

    Each render asks for at most :data:`PIXELS` x :data:`PIXELS` block means; a small matrix
    shows its entries (signed), a large one the average size of the entries in each block.
    The first picture spans the whole matrix, so its bounds set the opening ranges (no
    ``xlim``/``ylim``) and it is rendered once when the page opens.
    """
    rows, cols = view.shape

    def render(x_range: tuple[float, float] | None, y_range: tuple[float, float] | None
               ) -> hv.Image:
        col_range = _visible(x_range, cols)
        row_range = _visible(y_range, rows)
        exact = (row_range[1] - row_range[0] <= PIXELS
                 and col_range[1] - col_range[0] <= PIXELS)
        try:
            picture = view.picture(PIXELS, PIXELS, row_range=row_range, col_range=col_range,
                                   statistic="mean" if exact else "mean_abs")
        except ValueError:  # sizes need the entries; an unstructured matrix gives signed means
            picture = view.picture(PIXELS, PIXELS, row_range=row_range, col_range=col_range,
                                   statistic="mean")
        return picture_element(picture, view.column_label, view.row_label)

    if height is None:
        height = int(min(520, max(160, 60 + 6 * rows if rows < 60 else 420)))
    # The stream starts at the ranges HoloViews gives it when it draws the first picture
    # (the image's bounds, y as floats), so that update finds this picture memoised: with no
    # start the same whole matrix was rendered twice on every open.
    whole = hv.streams.RangeXY(x_range=(0, cols), y_range=(0.0, float(rows)))
    dynamic = hv.DynamicMap(render, streams=[whole])
    return dynamic.opts(
        hv.opts.Image(colorbar=True, invert_yaxis=True, tools=["hover", "save"],
                      shared_axes=False, title=view.title, height=height, responsive=True,
                      framewise=True,
                      default_tools=["pan", "wheel_zoom", "box_zoom", "reset"]))


def _visible(axis_range: tuple[float, float] | None, size: int) -> tuple[float, float]:
    """The part of ``0..size`` a zoomed axis shows (all of it before the first zoom)."""
    if axis_range is None or axis_range[0] is None or axis_range[1] is None:
        return (0.0, float(size))
    lo, hi = sorted((float(axis_range[0]), float(axis_range[1])))
    lo, hi = max(0.0, lo), min(float(size), hi)
    return (lo, hi) if hi - lo >= 1.0 else (max(0.0, min(lo, size - 1.0)),
                                             max(0.0, min(lo, size - 1.0)) + 1.0)
