"""Issue 29 item 8: the tour names the budget it uses, draws the error against eps, and its
bound is named in the legend (no label drawn over the bars)."""

from __future__ import annotations

import panel as pn
import pytest
from bokeh.models import Legend, Span

from explorer.pages.learn import LearnPage, bars_caption, tour_level
from explorer.planning.store import PlanStore
from explorer.session import Session

PREFIX = {"domain": {"x": {"size": 16, "kind": "numeric"}},
          "workload": [{"product": {"x": "prefix"}}],
          "privacy": {"noise": "gaussian", "epsilon": 0.5, "delta": 1e-6},
          "mechanisms": ["identity", "h2"]}


@pytest.fixture
def session() -> Session:
    s = Session(PREFIX, store=PlanStore())
    s.compare_now()
    return s


def test_the_tour_names_its_budget_and_the_error_in_people(session):
    best = session.comparison.best()
    text = tour_level(session.comparison)
    assert text.startswith("The charts use your current privacy level: **gaussian eps=0.5 "
                           "delta=1e-06**")
    typical = 1.959964 * best.rmse
    shown = f"{typical:,.1f}" if typical < 10 else f"{typical:,.0f}"
    assert f"**{best.mechanism}**, has a typical count within **+/- {shown} people**" in text
    bound = session.comparison.bound_rmse
    floor = 1.959964 * bound
    floor_shown = f"{floor:,.1f}" if floor < 10 else f"{floor:,.0f}"
    assert (f"the dashed line is the lower bound (a typical count within +/- {floor_shown} "
            f"people, RMSE {bound:.4g})") in bars_caption(session.comparison)
    assert "no lower bound is drawn" in bars_caption(None)


def test_the_tour_draws_error_against_eps_in_people(session):
    page = LearnPage(session=session)
    assert isinstance(page.__panel__(), pn.viewable.Viewable)
    figure = page._budget_chart(session.plans, "gaussian")
    assert figure.yaxis[0].axis_label == "typical error, +/- people at 95 %"
    lines = next(r.data_source.data for r in figure.renderers if "xs" in r.data_source.data)
    h2 = lines["mechanism"].index("h2")
    plan = session.plan("h2")
    xs, ys = lines["xs"][h2], lines["ys"][h2]
    i = next(k for k, x in enumerate(xs) if abs(x - 1.0) < 1e-9)
    assert ys[i] == pytest.approx(
        1.959964 * plan.rmse(session.privacy.with_(epsilon=1.0)), rel=1e-6)
    # the bar chart names the bound in its legend, not in a label over the bars
    bars = page.__panel__().select(pn.pane.Bokeh)[0].object
    labels = [item.label.value for legend in bars.select({"type": Legend})
              for item in legend.items if item.label.value]
    assert f"SVD lower bound: +/- {1.959964 * session.comparison.bound_rmse:,.1f}" in labels
    assert any(isinstance(r, Span) for r in bars.center)
