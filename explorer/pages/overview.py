"""Start page (index): what the workbench answers, where to begin, what is registered.

The engine's registry is read when the page is built, so mechanisms added by other modules
appear without changes here. Anything the engine cannot answer is shown in place of the
content: a page must never take the server down.
"""

from __future__ import annotations

import pandas as pd
import panel as pn

from engine import mechanism_class, registry_names
from explorer.components.markdown import Markdown
from explorer.components.messages import plain
from explorer.components.table import DataTable
from explorer.pages.base import PAGES, Page
from explorer.planning.schedule import is_data_dependent

NOTE = """
This workbench helps you publish **counts** (tables, cumulative counts, ranges) about a
confidential data set with **differential privacy**: random noise is added so that no single
person's record can be inferred, and the published numbers are still useful.

There are many ways to add that noise. The *matrix mechanisms* compared here all measure a
well-chosen set of counts with noise and then combine them into your answers. Which set is
best depends on your queries, so the workbench plans each mechanism for your queries and
reports its expected error, without touching any data.

The three questions it answers:

1. **Which mechanism is most accurate at my budget?** (Compare page)
2. **How far is that from the best possible?** (the SVD lower bound, on the Compare page)
3. **What does a smaller budget cost me?** (Privacy trade-off page)
"""


def mechanism_frame() -> pd.DataFrame:
    """Registered mechanisms with their title, family and one-line description."""
    rows = []
    for name in registry_names():
        cls = mechanism_class(name)
        rows.append({"mechanism": name, "title": cls.title or name,
                     "family": getattr(cls, "family", ""),
                     "needs data": "yes" if is_data_dependent(name) else "",
                     "what it measures": getattr(cls, "description", "")})
    return pd.DataFrame(rows, columns=["mechanism", "title", "family", "needs data",
                                       "what it measures"])


class OverviewPage(Page):
    """The index page."""

    title = "Differential privacy workbench"
    note = NOTE

    def __panel__(self) -> pn.viewable.Viewable:
        # Where to begin, the user's scenario and the mechanisms' heading are one text (one
        # model to build on every open), rewritten by a watcher of this page when the
        # scenario or its comparison changes.
        text = Markdown(self._text(), sizing_mode="stretch_width",
                                css_classes=["start-steps", "current-scenario"])
        self.watch(self.session, lambda *events: setattr(text, "object", self._text()),
                   ["scenario", "comparison"])
        return pn.Column(
            self.header("Plan differentially private releases of counts: compare mechanisms "
                        "on your queries, see how close they get to the best possible, and "
                        "what each privacy budget costs in accuracy."),
            text,
            self._mechanisms(),
            sizing_mode="stretch_width", css_classes=["overview-page"],
        )

    def _text(self) -> str:
        """Where to begin, the current scenario (and its best mechanism once compared) and
        the heading of the mechanism list, in Markdown."""
        steps = "\n".join(
            f"{i}. {self.link(path, label)}: {purpose}."
            for i, (path, label, purpose) in enumerate(PAGES[1:], start=1))
        lines = ["## Where to begin\n\n" + steps + "\n\nNew to this? "
                 f"{self.link('/learn', 'Take the guided tour')} of a classic example first.",
                 f"## Your scenario\n\n{self.session.scenario.workload.describe()}, "
                 f"{self.session.privacy.describe()}."]
        comparison = self.session.comparison
        best = comparison.best() if comparison is not None else None
        if best is not None:
            lines.append(f"Most accurate so far: **{best.mechanism}** (typical error "
                         f"{best.rmse:.4g} per count); see {self.link('/compare', 'Compare')}.")
        else:
            lines.append(f"Not compared yet: open {self.link('/compare', 'Compare')}.")
        lines.append("## Mechanisms")
        return "\n\n".join(lines)

    @staticmethod
    def _mechanisms() -> pn.viewable.Viewable:
        try:
            frame = mechanism_frame()
        except Exception as exc:  # an engine problem is shown instead of crashing the page
            return pn.pane.Alert(f"Engine not ready: {plain(exc)}", alert_type="warning")
        if frame.empty:
            return Markdown("No mechanisms are registered.")
        return DataTable(frame, sizing_mode="stretch_width", css_classes=["mechanism-list"])
