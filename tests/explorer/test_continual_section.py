"""The "published every month" preset and the Compare page's continual-release section (issue 33
item 3), rendered without a browser: the chart draws the engine's per-period errors, the
sentence is the engine's, and the section stays away from other workloads."""

from __future__ import annotations

import math

import numpy as np
import panel as pn
import pytest
from bokeh.models import GlyphRenderer
from scipy import stats

import engine
from explorer.components.continual import ERROR, PERIOD, continual_chart, continual_view
from explorer.pages.compare import ComparePage
from explorer.planning.store import PlanStore
from explorer.presets import PRESETS, build_preset
from explorer.session import Session

SIGMA = 4.224679  # analytic Gaussian, eps = 1, delta = 1e-6, unit L2 sensitivity
Z95 = float(stats.norm.ppf(0.975))


def lines(chart) -> dict[str, GlyphRenderer]:
    return {r.data_source.data["mechanism"][0]: r for r in chart.renderers
            if isinstance(r, GlyphRenderer) and PERIOD in r.data_source.data}


def test_the_preset_publishes_a_count_every_month_for_ten_years():
    spec = build_preset("published_every_month")
    assert spec["privacy"] == {"noise": "gaussian", "epsilon": 1.0, "delta": 1.0e-6}
    workload = engine.Scenario.from_spec(spec).workload
    assert (workload.num_queries, workload.domain.size, workload.domain.names) == \
        (120, 120, ("month",))
    assert engine.is_continual(workload)
    assert "120" in PRESETS["published_every_month"].title


@pytest.fixture(scope="module")
def comparison() -> engine.Comparison:
    return engine.compare(engine.continual_spec(24), mechanisms=["identity", "h2", "hb"])


def test_the_chart_draws_each_months_error_with_the_offline_optimum_dashed(comparison):
    price = engine.price_of_continual_release(comparison)
    drawn = lines(continual_chart(price))
    assert set(drawn) == {"identity", "h2", "hb"}
    identity = drawn["identity"].data_source.data
    assert identity[PERIOD] == list(range(1, 25))
    # identity's month-k count sums k noisy months: +/- 1.96 sigma sqrt(k) people
    assert np.asarray(identity[ERROR]) == pytest.approx(Z95 * SIGMA * np.sqrt(np.arange(1, 25)),
                                                        rel=1e-6)
    best = price.offline.mechanism
    assert best == min(("identity", "h2", "hb"),
                       key=lambda n: next(r.rmse for r in comparison.rows if r.mechanism == n))
    assert drawn[best].glyph.line_dash == [6]  # Bokeh's "dashed"
    assert all(drawn[n].glyph.line_dash == [] for n in drawn if n != best)
    assert np.asarray(drawn[best].data_source.data[ERROR]) == pytest.approx(
        price.per_period()[best].to_numpy(), rel=1e-12)


def test_the_section_says_the_engines_sentence(comparison):
    view = continual_view(comparison)
    texts = [m.object for m in view.select(pn.pane.Markdown)]
    assert texts[0] == "## Published every month"
    price = engine.price_of_continual_release(comparison)
    assert texts[1] == price.headline(markdown=True)
    if not engine.online_mechanisms():
        assert texts[1].startswith("No online mechanism is registered in this workbench")
    assert f"RMSE {price.offline.rmse:,.2f} people" in texts[1]
    assert continual_view(comparison, planning=True).select(pn.pane.Markdown)[1].object \
        .endswith("(Still planning: this may change.)")


def test_other_workloads_get_no_section():
    other = engine.compare({"domain": {"x": {"size": 8, "kind": "numeric"}},
                            "workload": [{"product": {"x": "all_range"}}]},
                           mechanisms=["identity"])
    assert continual_view(other) == "" and continual_view(None) == ""


def test_the_compare_page_carries_the_section():
    spec = {**build_preset("published_every_month"), "mechanisms": ["identity", "h2"]}
    session = Session(spec, store=PlanStore())
    view = ComparePage(session=session).__panel__()
    assert session.complete
    section = next(c for c in view.select(pn.Column) if "continual-release" in c.css_classes)
    headline = next(m for m in section.select(pn.pane.Markdown)
                    if "continual-headline" in m.css_classes)
    h2 = session.plan("h2").rmse()
    assert f"offline optimum: **h2**, RMSE {h2:,.2f} people" in headline.object
    assert math.isclose(h2, session.comparison.best().rmse)
