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

from engine.mechanisms import registry_names
from engine.workloads.catalog import classic_prefix
from explorer.components.charts import rmse_bars
from explorer.components.heatmap import matrix_heatmap
from explorer.components.notes import caption
from explorer.components.progress import PlanningProgress, served
from explorer.pages.base import Page

#: The mechanisms the tour compares, in the order it discusses them.
TOUR_MECHANISMS = ("identity", "h2", "wavelet", "hdmm")

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
* **RMSE**: the typical size of the error on one published count.
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

Open the {tradeoff} page to move eps and watch every mechanism's error change. Their
plans stay the same; only the noise level changes. Then open the {strategy} page to see
what each one measures.
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
            pn.pane.Markdown(absent, margin=(0, 10)) if absent else pn.Spacer(height=0),
            PlanningProgress(session=session),
            pn.pane.Markdown(STEPS, sizing_mode="stretch_width"),
            pn.bind(self._question, session.param.scenario),
            pn.pane.HoloViews(pn.bind(rmse_bars, session.param.comparison),
                              sizing_mode="stretch_width", css_classes=["tour-chart"]),
            caption("The typical error per count of each mechanism on your current workload "
                    "(the tour's, once started); the dashed line is the lower bound."),
            pn.pane.Markdown(steps_after, sizing_mode="stretch_width"),
            pn.pane.Markdown(GLOSSARY, sizing_mode="stretch_width", css_classes=["glossary"]),
            sizing_mode="stretch_width", css_classes=["learn-page"],
        )

    def _question(self, scenario: Any) -> pn.viewable.Viewable:
        w = scenario.workload
        line = pn.pane.Markdown(f"Current workload: **{w.describe()}**", margin=(0, 10),
                                css_classes=["tour-workload"])
        if w.num_queries * w.domain.size > 300_000:
            return pn.Column(line, pn.pane.Markdown(
                "(Too large to draw; start the tour to see the example.)", margin=(0, 10)))
        return pn.Column(line, pn.pane.HoloViews(
            matrix_heatmap(w.dense(), "The queries as a matrix", xlabel="value",
                           ylabel="query", height=320),
            sizing_mode="stretch_width"), sizing_mode="stretch_width")
