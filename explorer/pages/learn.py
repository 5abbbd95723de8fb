"""Learn page: a one-click tour of the classic example, and a short glossary.

The tour loads every prefix (cumulative count) query on one ordered attribute of 256 values
and compares identity, the binary hierarchy H2, the Haar wavelet and HDMM (whichever of them
are registered) against the SVD lower bound, then walks through what the results mean. The
user's own scenario is remembered and can be restored with one click.
"""

from __future__ import annotations

import copy
from typing import Any

import panel as pn

from engine import Comparison, classic_prefix, registry_names
from explorer.components.charts import LiveBarsChart, LiveTradeoffChart
from explorer.components.heatmap import matrix_heatmap
from explorer.components.lazy_view import on_sight
from explorer.components.markdown import Markdown
from explorer.components.notes import caption
from explorer.components.people import GAUSSIAN_FACTOR, people, people_factor, row_factor
from explorer.components.progress import PlanningProgress, served
from explorer.pages.base import Page
from explorer.pages.tradeoff import UNITS, curve_frame, knob_value, marker_frame

#: The mechanisms the tour compares, in the order it discusses them.
TOUR_MECHANISMS = ("identity", "h2", "wavelet", "hdmm")
#: About a chart's height on the page, in pixels (its placeholder's until it is drawn).
CHART_HEIGHT = 350

NOTE = """
This page is for learning the ideas behind the workbench with a small, classic example.
Press the button to load it; the charts fill in as the mechanisms are planned. Your own
workload is kept aside and comes back with *Back to my workload*.
"""

GLOSSARY = """
## Glossary

* **Differential privacy**: a promise that the published numbers would look almost the same
  whether or not any one person's record was in the data. *eps* measures "almost": smaller
  is more private.
* **Sensitivity**: how much one person can change the measured counts. Noise is scaled to
  it, so measurements that one person affects a lot need more noise.
* **Laplace / Gaussian noise**: the two usual kinds of random noise. Laplace gives pure
  eps-privacy; Gaussian needs a small failure probability *delta* but adds up more gently
  over many measurements.
* **Workload**: the counts you want to publish.
* **Strategy**: the counts a mechanism actually measures with noise; your answers are
  computed from them.
* **Error in people at 95 %**: a typical published count is within +/- this many people of
  the truth, 95 % of the time.
* **RMSE**: the same typical error as a standard deviation (root mean squared error); for
  Gaussian noise the 95 % error is 1.96 x RMSE.
* **SVD lower bound**: the smallest RMSE any strategy could achieve on your workload, at your
  budget. A mechanism close to it cannot be improved much.
"""

STEPS = """
### 1. The question

We want all 256 *cumulative counts* of one ordered attribute: how many records have value
0, at most 1, at most 2, ..., at most 255. The picture shows these queries: row v counts
every cell from 0 to v, so the matrix is a lower triangle.

### 2. Four ways to answer it

* **Identity** measures each of the 256 cells once and adds them up. A count near the top
  adds up to 256 noisy cells, so its noise piles up.
* **H2** measures a binary tree of intervals (all, halves, quarters, ...): any prefix is the
  sum of at most 8 tree nodes. Each record sits in 9 nodes, so each node needs more noise,
  but much less piles up per answer.
* **Wavelet** measures averages and differences at every scale, with a similar effect.
* **HDMM** searches for the best set of measurements for exactly these queries.
"""

STEPS_AFTER = """
### 3. How close to the best?

The dashed line is the SVD lower bound: no mechanism that measures fixed noisy counts and
combines them by least squares can do better on this workload. The closer a bar is to the
line, the less there is left to gain.

### 4. What the budget costs

The second chart draws each mechanism's error in people against the budget: a larger eps
(less privacy) gives smaller errors, and no mechanism's plan changes, only the noise level.
Open the {tradeoff} page to move eps yourself, and the {strategy} page to see what each
mechanism measures.
"""


class LearnPage(Page):
    """The learn page."""

    title = "Learn: a guided tour"
    note = NOTE

    def start_tour(self) -> None:
        """Load the classic example (remembering the user's draft) and plan it."""
        session = self.session
        if session.stash is None:
            session.stash = copy.deepcopy(session.draft)
        spec = classic_prefix()
        spec["privacy"] = session.privacy.to_spec()
        available = set(registry_names())
        spec["mechanisms"] = [m for m in TOUR_MECHANISMS if m in available]
        session.apply_draft(spec)
        if served():
            session.request_comparison(background=True)
        else:
            session.compare_now()

    def restore(self) -> None:
        """Bring back the draft from before the tour."""
        if self.session.stash is not None:
            stash, self.session.stash = self.session.stash, None
            self.session.apply_draft(stash)

    def __panel__(self) -> pn.viewable.Viewable:
        session = self.session
        start = pn.widgets.Button(label="Start the tour: prefix queries on 256 values",
                                  color="success", css_classes=["start-tour"])
        start.on_click(lambda event: self.start_tour())
        back = pn.widgets.Button(label="Back to my workload", color="light",
                                 css_classes=["end-tour"],
                                 disabled=pn.bind(lambda stash: stash is None,
                                                  session.param.stash))
        back.on_click(lambda event: self.restore())
        missing = [m for m in TOUR_MECHANISMS if m not in set(registry_names())]
        absent = (f"Not available in this build: {', '.join(missing)}." if missing else "")
        steps_after = STEPS_AFTER.format(tradeoff=self.link("/tradeoff", "privacy trade-off"),
                                         strategy=self.link("/strategy", "strategy"))
        return pn.Column(
            self.header("A one-click tour of the classic example, then a glossary."),
            pn.Row(start, back),
            *([Markdown(absent, margin=(0, 10))] if absent else []),
            PlanningProgress(session=session),
            Markdown(STEPS, sizing_mode="stretch_width"),
            pn.bind(self._question, session.param.scenario),
            Markdown(pn.bind(tour_level, session.param.comparison),
                             css_classes=["tour-level"], margin=(0, 10),
                             sizing_mode="stretch_width"),
            # the charts, each with its caption, are built when the reader scrolls near them
            on_sight(lambda: pn.Column(
                pn.pane.Bokeh(pn.bind(lambda c: LiveBarsChart(c, factor=row_factor).figure,
                                      session.param.comparison), sizing_mode="stretch_width"),
                caption(pn.bind(bars_caption, session.param.comparison)),
                sizing_mode="stretch_width", css_classes=["tour-chart"]), CHART_HEIGHT),
            on_sight(lambda: pn.Column(
                pn.pane.Bokeh(pn.bind(self._budget_chart, session.param.plans,
                                      session.privacy.param.noise), sizing_mode="stretch_width"),
                caption("Each line: a mechanism's typical error, +/- people at 95 %, at every "
                        "budget (both axes logarithmic); the dots mark the budget the tour "
                        "uses."),
                sizing_mode="stretch_width", css_classes=["tour-budget-chart"]), CHART_HEIGHT),
            # the last steps and the glossary in one pane (each pane is a model on every open)
            Markdown(steps_after + "\n\n" + GLOSSARY, sizing_mode="stretch_width",
                             css_classes=["glossary"]),
            sizing_mode="stretch_width", css_classes=["learn-page"],
        )

    def _budget_chart(self, plans: Comparison | None, noise: str) -> Any:
        """Every planned mechanism's typical error in people against eps (rho for zCDP), with
        the bound, as on the trade-off page (``plans`` and ``noise`` are inputs only: the
        chart is redrawn when they change)."""
        comparison = self.session.comparison
        privacy = comparison.privacy if comparison is not None else self.session.privacy
        y_label, y_name = UNITS["people"]
        return LiveTradeoffChart(curve_frame(comparison, privacy, "people"),
                                 marker_frame(comparison, "people"), knob_value(privacy),
                                 privacy.noise, height=340, y_label=y_label,
                                 y_name=y_name).figure

    def _question(self, scenario: Any) -> pn.viewable.Viewable:
        w = scenario.workload
        line = Markdown(f"Current workload: **{w.describe()}**", margin=(0, 10),
                                css_classes=["tour-workload"])
        if w.num_queries * w.domain.size > 300_000:
            return pn.Column(line, Markdown(
                "(Too large to draw; start the tour to see the example.)", margin=(0, 10)))
        return pn.Column(line, on_sight(lambda: pn.pane.HoloViews(
            matrix_heatmap(w.dense(), "The queries as a matrix", xlabel="value",
                           ylabel="query", height=320),
            sizing_mode="stretch_width"), 330), sizing_mode="stretch_width")


def tour_level(comparison: Comparison | None) -> str:
    """The budget the tour's numbers are for, and the best mechanism's error there."""
    if comparison is None:
        return "The charts use your current privacy level once the mechanisms are planned."
    text = (f"The charts use your current privacy level: **{comparison.privacy.describe()}** "
            "(change it on the privacy trade-off page).")
    best = comparison.best()
    if best is not None and best.plan is not None:
        typical = people_factor(best.plan)[0] * best.rmse
        text += (f" There the most accurate, **{best.mechanism}**, has a typical count within "
                 f"**{people(typical)}**, 95 % of the time (RMSE {best.rmse:.4g}).")
    return text


def bars_caption(comparison: Comparison | None) -> str:
    """What the bar chart draws (the bound's line only when there is a bound)."""
    bound = comparison.bound_rmse if comparison is not None else None
    line = (f"the dashed line is the lower bound (a typical count within "
            f"{people(GAUSSIAN_FACTOR * bound)}, RMSE {bound:.4g}), named in the legend"
            if bound is not None
            else "no lower bound is drawn: none is computed for this workload yet")
    return ("Each bar: a mechanism's typical error, +/- people at 95 % (a typical count is "
            "that close to the truth 95 % of the time; hover a bar for its RMSE), on your "
            f"current workload (the tour's, once started); {line}.")

