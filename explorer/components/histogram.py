"""A histogram of per-query errors that follows the privacy level without being redrawn.

Every query's error standard deviation is one factor (the noise scale) times its value at
unit noise, so the number of queries in each bin never changes with the privacy level: only
the bin edges scale. :class:`ScaledHistogram` bins once and, on a slider move, multiplies the
edges of its Bokeh data source, where a new chart would be rendered and sent on every move.
"""

from __future__ import annotations

import math

import numpy as np
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.plotting import figure

#: Most bins drawn (fewer for small workloads: about five queries per bin, at least five).
MAX_BINS = 40


def unit_bins(unit_errors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(counts, edges)`` of the errors at unit scale: equal-width bins over their range
    (a range widened by 5 % each way when every error is the same)."""
    errors = np.asarray(unit_errors, dtype=float)
    lo, hi = float(errors.min()), float(errors.max())
    if math.isclose(lo, hi, rel_tol=1e-9, abs_tol=1e-12):
        lo, hi = lo * 0.95, hi * 1.05 + 1e-12
    return np.histogram(errors, bins=min(MAX_BINS, max(5, errors.size // 5)), range=(lo, hi))


class ScaledHistogram:
    """How many queries have each level of expected error, at a scale set by :meth:`rescale`.

    Args:
        unit_errors: every query's error standard deviation at unit noise (finite, not empty).
        scale: the factor to the privacy level shown first (counts per unit).
        color: the bars' colour; title: the chart's title.
    """

    def __init__(self, unit_errors: np.ndarray, scale: float, color: str, title: str,
                 height: int = 300) -> None:
        self._counts, self._edges = unit_bins(unit_errors)
        self.source = ColumnDataSource(self._data(scale))
        self.figure = figure(height=height, sizing_mode="stretch_width", title=title,
                             tools="pan,wheel_zoom,box_zoom,reset,save",
                             x_axis_label="Expected error of a query (counts)",
                             y_axis_label="Number of queries")
        self.figure.quad(left="left", right="right", bottom=0, top="queries",
                         source=self.source, fill_color=color, line_color="white")
        self.figure.add_tools(HoverTool(tooltips=[("error", "@left{0,0.00} to @right{0,0.00}"),
                                                  ("queries", "@queries{0,0}")]))
        self.figure.y_range.start = 0

    def _data(self, scale: float) -> dict[str, np.ndarray]:
        edges = scale * self._edges
        return {"left": edges[:-1], "right": edges[1:], "queries": self._counts}

    @property
    def edges(self) -> np.ndarray:
        """The bin edges shown (counts)."""
        return np.concatenate([self.source.data["left"], self.source.data["right"][-1:]])

    @property
    def counts(self) -> np.ndarray:
        """The number of queries in each bin."""
        return np.asarray(self.source.data["queries"])

    def rescale(self, scale: float) -> None:
        """Show the errors at another factor from unit noise (counts per unit)."""
        self.source.data = self._data(scale)
