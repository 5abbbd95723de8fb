"""Overview page: the registered mechanisms and how they compare on a small sample workload.

The engine is imported lazily inside functions so that the page still renders (with the error
text in place of the content) while the engine is incomplete or broken: a page must never take
the server down.

Example:
    >>> page = OverviewPage()
    >>> page.heading
    'Differential privacy workbench'
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pandas as pd
import panel as pn
import param

#: A small scenario whose comparison is quick enough to show on page load: all 64 prefix
#: (CDF) queries over one numeric attribute under (1, 1e-6) Gaussian noise.
SAMPLE_SPEC: dict[str, Any] = {
    "domain": {"x": {"size": 64, "kind": "numeric"}},
    "workload": [{"product": {"x": "prefix"}}],
    "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1.0e-6},
}


def mechanism_names() -> list[str]:
    """Names of the mechanisms registered with the engine, in registry order."""
    from engine.mechanisms import registry_names

    return list(registry_names())


def sample_comparison(spec: dict[str, Any]) -> pd.DataFrame:
    """Compare the registered mechanisms on ``spec`` and return one row per mechanism.

    Accepts whatever ``engine.compare.compare_scenario`` returns: a DataFrame, a list of row
    mappings, or the ``compare --json`` document (whose ``results`` become the rows).
    """
    from engine.compare import compare_scenario

    return as_frame(compare_scenario(copy.deepcopy(spec)))


def as_frame(result: Any) -> pd.DataFrame:
    """Turn a comparison result into a DataFrame for display."""
    if isinstance(result, pd.DataFrame):
        return result
    if isinstance(result, dict) and "results" in result:
        return pd.DataFrame(list(result["results"]))
    if isinstance(result, list | tuple):
        return pd.DataFrame(list(result))
    raise TypeError(f"cannot display a comparison result of type {type(result).__name__}")


def engine_problem(exc: BaseException) -> str:
    """One line describing why the engine could not answer, for display in place of content."""
    prefix = "Engine not ready" if isinstance(exc, ImportError | AttributeError) else "Error"
    return f"{prefix}: {type(exc).__name__}: {exc}"


class OverviewPage(pn.viewable.Viewer):
    """Landing page: registered mechanisms and a sample comparison table.

    Args:
        spec: scenario (spec mapping, see the README) compared in the sample table.
    """

    heading = param.String(
        default="Differential privacy workbench", constant=True, doc="Page heading."
    )
    spec = param.Dict(default=SAMPLE_SPEC, doc="Scenario compared in the sample table.")

    def __panel__(self) -> pn.viewable.Viewable:
        mechanisms = pn.Column(
            pn.pane.Markdown("## Mechanisms"),
            self._mechanism_view(),
            css_classes=["mechanism-list"],
            sizing_mode="stretch_width",
        )
        self._comparison = pn.Column(
            pn.pane.Markdown("Comparing mechanisms on the sample workload..."),
            css_classes=["comparison-table"],
            sizing_mode="stretch_width",
            min_height=80,
        )
        comparison = pn.Column(
            pn.pane.Markdown(
                "## Sample comparison\n\nAll prefix queries over a numeric attribute of size 64, "
                "Gaussian noise with epsilon = 1, delta = 1e-6."
            ),
            self._comparison,
            sizing_mode="stretch_width",
        )
        doc = pn.state.curdoc
        if doc is not None and doc.session_context is not None:
            # Served: render the page first, then fill the table off the event loop so a slow
            # plan never blocks other sessions.
            self._comparison.loading = True
            pn.state.onload(self._fill_comparison)
        else:
            self._comparison.objects = [self._comparison_view(self._compute_comparison())]
        return pn.Column(
            pn.pane.Markdown(f"# {self.heading}"),
            mechanisms,
            comparison,
            sizing_mode="stretch_width",
        )

    def _mechanism_view(self) -> pn.viewable.Viewable:
        try:
            names = mechanism_names()
        except Exception as exc:  # the page shows any engine failure instead of crashing
            return pn.pane.Alert(engine_problem(exc), alert_type="warning")
        if not names:
            return pn.pane.Markdown("No mechanisms are registered.")
        return pn.pane.Markdown("\n".join(f"- `{name}`" for name in names))

    def _compute_comparison(self) -> pd.DataFrame | str:
        try:
            return sample_comparison(self.spec)
        except Exception as exc:  # the page shows any engine failure instead of crashing
            return engine_problem(exc)

    @staticmethod
    def _comparison_view(result: pd.DataFrame | str) -> pn.viewable.Viewable:
        if isinstance(result, str):
            return pn.pane.Alert(result, alert_type="warning")
        return pn.pane.DataFrame(result, index=False, sizing_mode="stretch_width")

    async def _fill_comparison(self) -> None:
        try:
            result = await asyncio.to_thread(self._compute_comparison)
            self._comparison.objects = [self._comparison_view(result)]
        finally:
            self._comparison.loading = False
