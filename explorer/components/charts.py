"""Charts shared by the pages, with one colour per mechanism everywhere.

Colours follow the registry order (``engine.mechanisms.registry_names()``), so a mechanism
keeps its colour on every chart and page of a running app; the SVD lower bound is always a
black dashed line. Every chart keeps Bokeh's toolbar, whose save tool exports a PNG.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import holoviews as hv
import numpy as np
import pandas as pd
from bokeh.events import LegendItemClick
from bokeh.models import (
    ColumnDataSource,
    FactorRange,
    HoverTool,
    Legend,
    LegendItem,
    Line,
    MultiLine,
    Scatter,
    Span,
    VBar,
)
from bokeh.palettes import Category20, Category20b
from bokeh.plotting import figure

from engine import Comparison, ComparisonRow, budget_name, gaussian_half_width, registry_names

hv.extension("bokeh", logo=False)

BOUND_COLOR = "#111111"
BOUND_LABEL = "SVD lower bound"
#: Strong colours first, then their light partners, then a second family.
PALETTE: tuple[str, ...] = (tuple(Category20[20][0::2]) + tuple(Category20[20][1::2])
                            + tuple(Category20b[20]))
TOOLS = ["hover", "save"]


def mechanism_colors(names: Iterable[str] | None = None) -> dict[str, str]:
    """Colour of every registered mechanism (plus any extra ``names``), by registry order."""
    order = list(registry_names())
    for name in names or ():
        if name not in order:
            order.append(name)
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(order)}


def color_of(name: str) -> str:
    """The colour of one mechanism."""
    return mechanism_colors([name])[name]


def _needs_log(values: Sequence[float]) -> bool:
    positive = [v for v in values if v and v > 0]
    return len(positive) > 1 and max(positive) / min(positive) > 30


def privacy_knob(noise: str) -> tuple[str, str]:
    """The privacy parameter a trade-off chart sweeps: (attribute name, axis label)."""
    name = budget_name(noise)
    return name, "rho (zCDP)" if name == "rho" else name


#: Line styles of a mechanism's curve: solid, then one per earlier mechanism drawing the same.
COPY_DASHES = ("solid", "dotted", "dotdash", "dashdot")


def same_curves(frame: pd.DataFrame, rel: float = 1e-9) -> dict[str, tuple[str, int]]:
    """Which mechanisms draw exactly the line of an earlier one (e.g. hb on a small domain is
    identity): ``{name: (first mechanism with that line, how many earlier ones have it)}``, the
    count picking each copy's dash style. The bound is never matched.
    """
    seen: list[tuple[str, np.ndarray]] = []
    copies: dict[str, tuple[str, int]] = {}
    for name, part in frame.groupby("mechanism", sort=False):
        if name == BOUND_LABEL:
            continue
        values = part["rmse"].to_numpy(dtype=float)
        earlier = [other for other, line in seen
                   if line.shape == values.shape and np.allclose(line, values, rtol=rel, atol=0)]
        if earlier:
            copies[str(name)] = (earlier[0], len(earlier))
        seen.append((str(name), values))
    return copies


#: Opacity of the curves not highlighted.
FADED_ALPHA = 0.15

#: Column names of the current-point markers; distinctive so tests can find their data.
MARKER_X, MARKER_Y = "current_x", "current_rmse"


def marker_columns(points: pd.DataFrame) -> dict[str, list]:
    """The columns of the marker layer's data source for a table of current points."""
    names = list(points.get("mechanism", []))
    colors = mechanism_colors(m for m in names if m != BOUND_LABEL)
    return {MARKER_X: [float(v) for v in points.get("x", [])],
            MARKER_Y: [float(v) for v in points.get("rmse", [])],
            "mechanism": names,
            "color": [BOUND_COLOR if m == BOUND_LABEL else colors[m] for m in names]}


#: The y-axis label of every RMSE chart.
RMSE_LABEL = "RMSE (typical error per query)"
#: The y-axis label of the bar chart: a typical count's error in people at 95 %.
PEOPLE_LABEL = "typical error, +/- people (95 %)"
#: A Gaussian error's 95 % half-width over its standard deviation (1.959964).
GAUSSIAN_95 = float(gaussian_half_width(1.0, 0.95))
#: Bokeh's tools on the live charts (hover is added per layer): save exports a PNG. Pan and
#: zoom are left out: the charts show every value they have at once, and the four tools with
#: their overlays were seven Bokeh models on every page open.
LIVE_TOOLS = "save"
# The live charts' layers are added with ``add_glyph``, not ``figure.line``/``vbar``...: those
# make a selection and a muted copy of every glyph (two more Bokeh models per layer), which
# nothing here selects or mutes.


class LiveTradeoffChart:
    """The trade-off chart as a Bokeh figure whose current-point layer moves in place.

    The curves' ``rmse`` column is the error in the unit the y axis names (``y_label``; its
    short name ``y_name`` in the tooltips): the RMSE, or a typical count's error in people.

    Drawn with Bokeh directly: every curve and the bound are one multi-line layer (one row of
    :attr:`curves` per line, with its colour, dash, width and alpha; a renderer per curve was
    nine Bokeh models each on every page open), the current points a scatter layer. The
    hover on a curve names the mechanism and the nearest point of its line.
    Afterwards :meth:`move` rewrites only the markers' data source and the vertical line,
    which is what keeps a slider release fast: no new figure.
    """

    def __init__(self, curves: pd.DataFrame, points: pd.DataFrame, x_now: float,
                 noise: str, height: int = 420, y_label: str = RMSE_LABEL,
                 y_name: str = "RMSE") -> None:
        _, xlabel = privacy_knob(noise)
        self.figure = figure(
            x_axis_type="log", y_axis_type="log", height=height, sizing_mode="stretch_width",
            title=f"Error as {xlabel} changes", x_axis_label=xlabel, y_axis_label=y_label,
            tools=LIVE_TOOLS)
        colors = mechanism_colors(m for m in curves["mechanism"].unique() if m != BOUND_LABEL)
        copies = same_curves(curves)
        groups = [(str(name), part) for name, part in curves.groupby("mechanism", sort=False)]
        # Drawn worst first, so the best mechanism's line (the frame lists the best first) lies
        # on top of near-identical ones, and the bound above them all; the legend keeps the
        # frame's order.
        drawing = ([g for g in reversed(groups) if g[0] != BOUND_LABEL]
                   + [g for g in groups if g[0] == BOUND_LABEL])
        self.curves = ColumnDataSource({
            # arrays, not lists: Bokeh sends an array as one binary buffer, a list number by number
            "xs": [part["x"].to_numpy(dtype=float) for _, part in drawing],
            "ys": [part["rmse"].to_numpy(dtype=float) for _, part in drawing],
            "mechanism": [name for name, _ in drawing],
            "color": [BOUND_COLOR if name == BOUND_LABEL else colors[name]
                      for name, _ in drawing],
            "dash": ["dashed" if name == BOUND_LABEL
                     else COPY_DASHES[min(copies.get(name, (None, 0))[1], len(COPY_DASHES) - 1)]
                     for name, _ in drawing],
            "width": [self._width(name, None) for name, _ in drawing],
            "alpha": [1.0] * len(drawing)})
        lines = self.figure.add_glyph(self.curves, MultiLine(
            xs="xs", ys="ys", line_color="color", line_dash="dash", line_width="width",
            line_alpha="alpha"))
        order = [name for name, _ in drawing]
        items = []
        for name, _ in groups:
            first, _ = copies.get(name, (None, 0))
            items.append(LegendItem(label=f"{name} (same as {first})" if first else name,
                                    renderers=[lines], index=order.index(name)))
        self.source = ColumnDataSource(marker_columns(points))
        dots = self.figure.add_glyph(self.source, Scatter(
            x=MARKER_X, y=MARKER_Y, size=11, fill_color={"field": "color"},
            line_color="white"))
        self.span = Span(location=float(x_now), dimension="height", line_color="#888888",
                         line_width=1.5)
        self.figure.add_layout(self.span)
        self.figure.add_tools(
            HoverTool(renderers=[lines], line_policy="nearest",
                      tooltips=[("mechanism", "@mechanism"), (xlabel, "$snap_x"),
                                (y_name, "$snap_y{0,0.00}")]),
            HoverTool(renderers=[dots], tooltips=[("mechanism", "@mechanism"),
                                                  (xlabel, f"@{MARKER_X}"),
                                                  (y_name, f"@{MARKER_Y}{{0,0.00}}")]))
        if items:
            self.figure.add_layout(Legend(items=items, location="top_left"), "right")

    @staticmethod
    def _width(name: str, highlighted: str | None) -> float:
        if name == BOUND_LABEL:
            return 2.0
        return 5.0 if highlighted is not None and name == highlighted else 2.5

    def move(self, points: pd.DataFrame, x_now: float) -> None:
        """Show a new current privacy level."""
        self.source.data = marker_columns(points)
        self.span.location = float(x_now)

    def highlight(self, mechanism: str | None) -> None:
        """Draw one mechanism's curve bold and fade the others (None: all as drawn)."""
        names = self.curves.data["mechanism"]
        self.curves.data.update(
            alpha=[1.0 if mechanism is None or name == mechanism else FADED_ALPHA
                   for name in names],
            width=[self._width(name, mechanism) for name in names])


class LiveBarsChart:
    """A typical count's error in people at 95 % per applicable mechanism as bars, best first,
    with the SVD bound as a dashed line, drawn with Bokeh directly and re-scaled in place.

    A bar is ``factor(row) x RMSE`` (default 1.959964 x RMSE, Gaussian noise; the Compare page
    passes each plan's own factor, so the bars match its table), the bound 1.959964 x the
    bound's RMSE; the hover names the RMSE and the ratio to the bound beside it.

    The bars are one renderer (one row of :attr:`source` per mechanism, with its colour,
    alpha and outline: a renderer per bar was nine Bokeh models each on every page open);
    each mechanism has a legend entry (right of the plot) pointing at its row, and the bound's
    entry carries its value, so no label is drawn over the bars. Clicking a legend entry
    highlights that mechanism (:meth:`pick`: its bar outlined, the others faded; clicking it
    again shows all alike), then calls ``on_pick(mechanism or None)``. A new privacy level
    only rewrites the bars' heights (:meth:`rescale`), so a slider release builds no figure.
    """

    def __init__(self, comparison: Comparison | None, height: int = 340,
                 on_pick: Callable[[str | None], None] | None = None,
                 factor: Callable[[ComparisonRow], float] | None = None) -> None:
        rows = [r for r in comparison.rows if r.rmse is not None] if comparison else []
        self.mechanisms = tuple(r.mechanism for r in rows)
        self._factor = factor or (lambda row: GAUSSIAN_95)
        bound = comparison.bound_rmse if comparison is not None else None
        values = [float(r.rmse) for r in rows] + ([bound] if bound else [])
        self.logy = _needs_log(values)
        self.highlighted: str | None = None
        self._on_pick = on_pick
        self.figure = figure(
            x_range=FactorRange(*self.mechanisms), height=height, sizing_mode="stretch_width",
            y_axis_type="log" if self.logy else "linear", y_axis_label=PEOPLE_LABEL,
            title=("Expected error per mechanism" + (" (log scale)" if self.logy else "")
                   if rows else "No results yet"),
            tools=LIVE_TOOLS)
        self.figure.xaxis.major_label_orientation = 0.5 if len(rows) > 6 else 0.0
        colors = mechanism_colors(self.mechanisms)
        count = len(self.mechanisms)
        self.source = ColumnDataSource({
            "mechanism": list(self.mechanisms), "people": [0.0] * count, "rmse": [0.0] * count,
            "ratio": [0.0] * count, "bottom": [0.0] * count,
            "color": [colors[name] for name in self.mechanisms], "alpha": [1.0] * count,
            "outline": [0.0] * count})
        self.bars = self.figure.add_glyph(self.source, VBar(
            x="mechanism", top="people", bottom="bottom", width=0.8, fill_color="color",
            fill_alpha="alpha", line_color=BOUND_COLOR, line_alpha="outline", line_width=2.0))
        items = [LegendItem(label=name, renderers=[self.bars], index=i)
                 for i, name in enumerate(self.mechanisms)]
        self._item_names = {item.id: name for item, name in zip(items, self.mechanisms,
                                                                strict=True)}
        self.span = Span(location=bound or 0.0, dimension="width", line_color=BOUND_COLOR,
                         line_dash="dashed", line_width=2, visible=bound is not None)
        self.figure.add_layout(self.span)
        # An empty line stands for the bound in the legend (a span has no legend entry).
        self.bound_entry = self.figure.add_glyph(
            ColumnDataSource({"x": [], "y": []}),
            Line(x="x", y="y", line_color=BOUND_COLOR, line_dash="dashed", line_width=2))
        self.bound_item = LegendItem(label="", renderers=[self.bound_entry],
                                     visible=bound is not None)
        self.figure.add_tools(HoverTool(renderers=[self.bars], tooltips=[
            ("mechanism", "@mechanism"), ("+/- people (95 %)", "@people{0,0.0}"),
            ("RMSE", "@rmse{0,0.0000}"),
            ("times the lower bound", "@ratio{0.000}")]))
        if rows:
            legend = Legend(items=[*items, self.bound_item], location="top_left",
                            title="Click to highlight")
            legend.on_event(LegendItemClick, self._legend_clicked)
            self.figure.add_layout(legend, "right")
        self.rescale(comparison)

    def fits(self, comparison: Comparison | None) -> bool:
        """True when ``comparison`` has the same mechanisms (in the same order) and scale,
        so :meth:`rescale` can show it."""
        rows = [r for r in comparison.rows if r.rmse is not None] if comparison else []
        bound = comparison.bound_rmse if comparison is not None else None
        values = [float(r.rmse) for r in rows] + ([bound] if bound else [])
        return tuple(r.mechanism for r in rows) == self.mechanisms and (
            _needs_log(values) == self.logy) and ((bound is not None) == self.span.visible)

    def rescale(self, comparison: Comparison | None) -> None:
        """Show the bars and the bound of ``comparison`` (same mechanisms, see :meth:`fits`)."""
        rows = {r.mechanism: r for r in comparison.rows if r.rmse is not None
                } if comparison is not None else {}
        rmse = {name: float(row.rmse) for name, row in rows.items()}
        people = {name: self._factor(row) * rmse[name] for name, row in rows.items()}
        bound = comparison.bound_rmse if comparison is not None else None
        bound_people = GAUSSIAN_95 * bound if bound is not None else None
        low = min([*people.values(), *([bound_people] if bound_people else [])], default=1.0)
        bottom = low / 3 if self.logy else 0.0
        names = self.mechanisms
        self.source.data.update(
            people=[people[name] for name in names], rmse=[rmse[name] for name in names],
            ratio=[rmse[name] / bound if bound else math.nan for name in names],
            bottom=[bottom] * len(names))
        if bound_people is not None:
            self.span.location = bound_people
            self.bound_item.label = {"value": f"{BOUND_LABEL}: +/- {bound_people:,.1f}"}

    def highlight(self, mechanism: str | None) -> None:
        """Draw one mechanism's bar outlined and fade the others (None: all alike)."""
        self.highlighted = mechanism if mechanism in self.mechanisms else None
        chosen = [self.highlighted is None or name == self.highlighted
                  for name in self.mechanisms]
        self.source.data.update(
            alpha=[1.0 if c else FADED_ALPHA for c in chosen],
            outline=[1.0 if c and self.highlighted is not None else 0.0 for c in chosen])

    def pick(self, mechanism: str | None) -> None:
        """What a click on a legend entry does: highlight ``mechanism``, or show all alike
        when it is highlighted already (or is the bound); then ``on_pick`` hears of it."""
        chosen = None if mechanism == self.highlighted else mechanism
        self.highlight(chosen)
        if self._on_pick is not None:
            self._on_pick(self.highlighted)

    def _legend_clicked(self, event: LegendItemClick) -> None:
        self.pick(self._item_names.get(event.item.id))


def weights_bars(weights: Mapping[str, float], title: str, ylabel: str = "weight",
                 color: str = "#1f77b4", height: int = 300) -> hv.Bars:
    """A bar per named weight (e.g. the share of the budget each marginal gets)."""
    frame = pd.DataFrame({"name": [str(k) for k in weights],
                          "value": [float(v) for v in weights.values()]})
    return hv.Bars(frame, kdims=[hv.Dimension("name", label="part")],
                   vdims=[hv.Dimension("value", label=ylabel)]).opts(
        color=color, tools=TOOLS, height=height, responsive=True, title=title,
        xrotation=45 if len(frame) > 8 else 0, shared_axes=False,
        default_tools=["pan", "wheel_zoom", "box_zoom", "reset"])


def series_curve(values: Sequence[float], title: str, xlabel: str = "step",
                 ylabel: str = "value", color: str = "#1f77b4", height: int = 280) -> hv.Curve:
    """Values in order (optimiser progress, restarts, per-query weights) as a line with dots;
    a log scale when they span several orders of magnitude."""
    y = np.asarray(values, dtype=float)
    finite = y[np.isfinite(y)]
    frame = pd.DataFrame({"step": np.arange(y.size), "value": np.where(np.isfinite(y), y,
                                                                        np.nan)})
    curve = hv.Curve(frame, kdims=[hv.Dimension("step", label=xlabel)],
                     vdims=[hv.Dimension("value", label=ylabel)])
    return curve.opts(color=color, tools=TOOLS, height=height, responsive=True, title=title,
                      logy=bool(finite.size) and float(finite.min()) > 0
                      and _needs_log(finite.tolist()),
                      shared_axes=False,
                      default_tools=["pan", "wheel_zoom", "box_zoom", "reset"])
