"""Charts shared by the pages, with one colour per mechanism everywhere.

Colours follow the registry order (``engine.mechanisms.registry_names()``), so a mechanism
keeps its colour on every chart and page of a running app; the SVD lower bound is always a
black dashed line. Every chart keeps Bokeh's toolbar, whose save tool exports a PNG.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import holoviews as hv
import numpy as np
import pandas as pd
from bokeh.palettes import Category20, Category20b

from engine.compare import Comparison
from engine.mechanisms import registry_names
from engine.privacy import budget_name

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


def rmse_bars(comparison: Comparison | None, height: int = 340) -> hv.Overlay | hv.Bars:
    """RMSE per applicable mechanism, best first, with the SVD bound as a labelled line."""
    rows = [r for r in comparison.rows if r.rmse is not None] if comparison else []
    colors = mechanism_colors(r.mechanism for r in rows)
    bound = comparison.bound_rmse if comparison else None
    frame = pd.DataFrame({
        "mechanism": [r.mechanism for r in rows],
        "rmse": [float(r.rmse) for r in rows],
        "ratio": [float(r.rmse / bound) if bound else math.nan for r in rows],
        "color": [colors[r.mechanism] for r in rows],
    })
    logy = _needs_log(list(frame["rmse"]) + ([bound] if bound else []))
    bars = hv.Bars(
        frame, kdims=[hv.Dimension("mechanism", label="Mechanism")],
        vdims=[hv.Dimension("rmse", label="RMSE (typical error per query)"),
               hv.Dimension("ratio", label="Times the lower bound"), "color"],
    ).opts(color="color", line_color=None, tools=TOOLS, height=height, responsive=True,
           logy=logy, xrotation=30 if len(rows) > 6 else 0, show_grid=True,
           title="Expected error per mechanism" + (" (log scale)" if logy else ""),
           shared_axes=False,
           default_tools=["pan", "wheel_zoom", "box_zoom", "reset"])
    if not rows:
        return bars.opts(title="No results yet")
    if bound is None:
        return bars
    top = max(frame["rmse"].max(), bound)
    line = hv.HLine(bound).opts(color=BOUND_COLOR, line_dash="dashed", line_width=2)
    label = hv.Text(rows[-1].mechanism, bound, f"{BOUND_LABEL}: {bound:.4g}  ",
                    halign="right", valign="bottom", fontsize=10).opts(color=BOUND_COLOR)
    ylim = (None, top * (3 if logy else 1.12))
    return (bars * line * label).opts(hv.opts.Bars(ylim=ylim))


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


def tradeoff_curves(frame: pd.DataFrame, noise: str) -> hv.Overlay:
    """Log-log RMSE against eps (or rho) per mechanism, with the bound as a dashed line.

    Args:
        frame: long table with columns ``x``, ``rmse``, ``mechanism`` (the bound's rows have
            mechanism :data:`BOUND_LABEL`).
        noise: the noise family (picks the x-axis label).
    """
    _, xlabel = privacy_knob(noise)
    xdim = hv.Dimension("x", label=xlabel)
    ydim = hv.Dimension("rmse", label="RMSE (typical error per query)")
    colors = mechanism_colors(m for m in frame["mechanism"].unique() if m != BOUND_LABEL)
    copies = same_curves(frame)
    curves = []
    for name, part in frame.groupby("mechanism", sort=False):
        is_bound = name == BOUND_LABEL
        first, earlier = copies.get(str(name), (None, 0))
        label = f"{name} (same as {first})" if first else str(name)
        dash = "dashed" if is_bound else COPY_DASHES[min(earlier, len(COPY_DASHES) - 1)]
        curve = hv.Curve(part, xdim, [ydim, "mechanism"], label=label).opts(
            color=BOUND_COLOR if is_bound else colors[str(name)],
            line_dash=dash, line_width=2 if is_bound else 2.5,
            tools=TOOLS, logx=True, logy=True)
        curves.append(curve)
    if not curves:
        curves.append(hv.Curve([], xdim, ydim).opts(logx=True, logy=True))
    return hv.Overlay(curves)


def style_tradeoff(chart: hv.Overlay | hv.DynamicMap, noise: str, height: int = 420):
    """Plot options of the composed trade-off chart (curves and markers)."""
    _, xlabel = privacy_knob(noise)
    return chart.opts(hv.opts.Overlay(
        logx=True, logy=True, height=height, responsive=True, show_grid=True,
        legend_position="right", title=f"Error as {xlabel} changes", shared_axes=False,
        default_tools=["pan", "wheel_zoom", "box_zoom", "reset"]))


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


def tradeoff_markers(points: pd.DataFrame, x_now: float, noise: str) -> hv.Overlay:
    """The current privacy level: a vertical line and one dot per mechanism."""
    _, xlabel = privacy_knob(noise)
    data = pd.DataFrame(marker_columns(points))
    dots = hv.Points(data, [hv.Dimension(MARKER_X, label=xlabel),
                            hv.Dimension(MARKER_Y, label="RMSE (typical error per query)")],
                     ["mechanism", "color"]).opts(color="color", size=11, line_color="white",
                                                  tools=["hover"], logx=True, logy=True)
    now = hv.VLine(x_now).opts(color="#888888", line_width=1.5)
    return dots * now


class LiveTradeoffChart:
    """The trade-off chart as a Bokeh figure whose current-point layer moves in place.

    Built with HoloViews once (curves, bound, markers); afterwards :meth:`move` rewrites only
    the markers' data source and the vertical line, which is what keeps a slider release
    fast: no HoloViews re-render, no new figure.
    """

    def __init__(self, curves: pd.DataFrame, points: pd.DataFrame, x_now: float,
                 noise: str) -> None:
        from bokeh.models import ColumnDataSource, Span

        overlay = tradeoff_curves(curves, noise) * tradeoff_markers(points, x_now, noise)
        self.figure = hv.render(style_tradeoff(overlay, noise), backend="bokeh")
        self.source = next(src for src in self.figure.select({"type": ColumnDataSource})
                           if MARKER_X in src.data)
        self.span = next(iter(self.figure.select({"type": Span})))

    def move(self, points: pd.DataFrame, x_now: float) -> None:
        """Show a new current privacy level."""
        self.source.data = marker_columns(points)
        self.span.location = float(x_now)

    def highlight(self, mechanism: str | None) -> None:
        """Draw one mechanism's curve bold and fade the others (None: all as drawn)."""
        from bokeh.models import GlyphRenderer

        for renderer in self.figure.select({"type": GlyphRenderer}):
            names = renderer.data_source.data.get("mechanism")
            if names is None or not len(names) or MARKER_X in renderer.data_source.data:
                continue
            chosen = mechanism is None or names[0] == mechanism
            if hasattr(renderer.glyph, "line_alpha"):
                renderer.glyph.line_alpha = 1.0 if chosen else FADED_ALPHA
            if hasattr(renderer.glyph, "line_width") and names[0] != BOUND_LABEL:
                renderer.glyph.line_width = 5.0 if mechanism is not None and chosen else 2.5


def error_histogram(errors: np.ndarray, color: str, title: str, height: int = 300
                    ) -> hv.Histogram:
    """How many queries have each level of expected error (RMSE of the single query)."""
    errors = np.asarray(errors, dtype=float)
    if errors.size == 0 or not np.all(np.isfinite(errors)):
        return hv.Histogram([]).opts(title=title)
    lo, hi = float(errors.min()), float(errors.max())
    if math.isclose(lo, hi, rel_tol=1e-9, abs_tol=1e-12):
        lo, hi = lo * 0.95, hi * 1.05 + 1e-12
    counts, edges = np.histogram(errors, bins=min(40, max(5, errors.size // 5)), range=(lo, hi))
    return hv.Histogram((edges, counts), kdims=[hv.Dimension("error",
                                                             label="Expected error of a query")],
                        vdims=[hv.Dimension("queries", label="Number of queries")]).opts(
        color=color, line_color="white", tools=TOOLS, height=height, responsive=True,
        title=title, shared_axes=False,
        default_tools=["pan", "wheel_zoom", "box_zoom", "reset"])


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
