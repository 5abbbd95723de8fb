"""The Compare page's "published every period" section: each period's error per mechanism, and
the price of publishing every period against publishing once, in one sentence.

Shown only when the workload is the prefix sums of one ordered attribute (a count to date,
published every month): :func:`engine.is_continual`. The numbers, which mechanisms are online
and the ratio all come from :func:`engine.price_of_continual_release`; this module only draws.
Online mechanisms (names starting ``online-``) appear as soon as a family registers them.
"""

from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.models import ColumnDataSource, HoverTool, Legend, LegendItem
from bokeh.plotting import figure

from engine import Comparison, ContinualPrice, is_continual, is_online, price_of_continual_release
from explorer.components.background import BackgroundView
from explorer.components.charts import LIVE_TOOLS, mechanism_colors
from explorer.components.notes import caption
from explorer.session import Session

#: Column names of each line's data source: distinctive, so tests find the chart's data.
PERIOD, ERROR = "period", "error_95"


def continual_chart(price: ContinualPrice, height: int = 380) -> figure:
    """One line per applicable mechanism: x the period (1..n), y the +/- people at 95 % of
    that period's cumulative count. The offline optimum is dashed and thick, online
    mechanisms solid, the other offline ones thin and light; clicking a legend entry hides
    its line."""
    frame = price.per_period()
    names = [row.mechanism for row in price.rows()]
    colors = mechanism_colors(names)
    best = price.offline.mechanism if price.offline is not None else None
    period = price.period
    chart = figure(height=height, sizing_mode="stretch_width", tools=LIVE_TOOLS,
                   title=f"Error of each {period}'s cumulative count",
                   x_axis_label=period, y_axis_label="error (+/- people, 95 %)")
    items, lines = [], []
    # other offline mechanisms first (underneath), then online ones, the optimum on top
    for name in sorted(names, key=lambda n: (n == best, is_online(n))):
        source = ColumnDataSource({PERIOD: frame["period"].tolist(),
                                   ERROR: frame[name].astype(float).tolist(),
                                   "mechanism": [name] * len(frame)})
        online = is_online(name)
        line = chart.line(PERIOD, ERROR, source=source, line_color=colors[name],
                          line_dash="dashed" if name == best else "solid",
                          line_width=3.5 if name == best else 2.5 if online else 1.5,
                          line_alpha=1.0 if name == best or online else 0.55)
        lines.append(line)
        label = (f"{name} (offline optimum)" if name == best
                 else f"{name} (online)" if online else name)
        items.append((names.index(name), LegendItem(label=label, renderers=[line])))
    chart.add_tools(HoverTool(renderers=lines, tooltips=[
        ("mechanism", "@mechanism"), (period, f"@{PERIOD}"),
        ("+/- people at 95 %", f"@{ERROR}{{0,0.0}}")]))
    if items:
        legend = Legend(items=[item for _, item in sorted(items, key=lambda pair: pair[0])],
                        location="top_left", click_policy="hide", title="Click to hide")
        chart.add_layout(legend, "right")
    return chart


def continual_view(comparison: Comparison | None, planning: bool = False) -> Any:
    """The section for ``comparison``: a heading, the price in a sentence, the chart; an
    empty string (nothing shown) unless the workload is a count published every period.

    ``planning``: mechanisms are still being planned (the sentence says it may change).
    """
    if comparison is None or not is_continual(comparison.workload):
        return ""
    price = price_of_continual_release(comparison)
    period = price.period
    sentence = price.headline(markdown=True)
    if planning:
        sentence += " (Still planning: this may change.)"
    parts: list[Any] = [
        pn.pane.Markdown(f"## Published every {period}", margin=(0, 10)),
        pn.pane.Markdown(sentence, css_classes=["continual-headline"],
                         sizing_mode="stretch_width", styles={"font-size": "1.1em"})]
    if price.rows():
        parts += [
            pn.Column(pn.pane.Bokeh(continual_chart(price), sizing_mode="stretch_width"),
                      sizing_mode="stretch_width", css_classes=["continual-chart"]),
            caption(f"Each line is a mechanism; a point is the error of the cumulative count "
                    f"published for that {period}: within +/- this many people of the truth "
                    f"with 95 % probability. An *online* mechanism fixes each {period}'s "
                    f"noise when it publishes that {period}, as a count published every "
                    f"{period} must; the dashed line, the *offline optimum*, is the most "
                    "accurate mechanism that publishes all of them once, at the end.")]
    # a rule drawn by the column's border, not a Divider: the section is built after the page
    # has loaded, and a Divider made then asks for its stylesheet from Panel's CDN
    return pn.Column(*parts, sizing_mode="stretch_width",
                     styles={"border-top": "1px solid #dddddd", "padding-top": "10px",
                             "margin-top": "10px"})


def continual_section(session: Session) -> BackgroundView:
    """The section, rebuilt off the event loop whenever the session's comparison changes."""
    return BackgroundView(lambda comparison: continual_view(comparison, not session.complete),
                          session.param.comparison, css_classes=["continual-release"])
