"""The strategy page's pictures and per-attribute views: a zoom re-renders the visible range
from the engine's block means, the count precision per value equals the plan's own variance
of that count, and diagnostics are marked for the folded Details."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import panel as pn
import pytest
from bokeh.models import Plot

from engine import FactsView, MatrixView, Scenario, gaussian_half_width
from engine.linalg.matrix import Dense, Kron, Matrix, Sum
from engine.mechanisms import get
from explorer.components.matrix_picture import PIXELS, zoomable_picture
from explorer.pages.strategy import (
    DETAILS,
    StrategyPage,
    drawable,
    strategy_views,
    value_count_views,
)
from explorer.planning.store import PlanStore
from explorer.session import Session

WORDS = {"title": "A", "caption": "What this shows, in words."}


def test_a_zoom_re_renders_the_visible_range_at_screen_resolution():
    L = np.tril(np.ones((1000, 1000)))
    view = MatrixView(key="A", matrix=Kron([Dense(L)] * 3), **WORDS)  # 1e9 x 1e9
    picture = zoomable_picture(view)
    assert isinstance(picture, hv.DynamicMap)
    whole = picture[()]
    assert whole.data.shape == (PIXELS, PIXELS)
    assert whole.bounds.lbrt() == (0, 0, 10**9, 10**9)
    assert whole.vdims[0].label == "average size of the entries"
    # zoomed in to 10 x 11 entries: the entries themselves (signed), over that range only
    picture.streams[0].event(x_range=(10.2, 20.7), y_range=(5, 15))
    zoomed = picture[()]
    assert zoomed.bounds.lbrt() == (10, 5, 21, 15)
    assert zoomed.vdims[0].label == "entry"
    rows, cols = np.arange(5, 15), np.arange(10, 21)
    expected = (rows[:, None] >= cols[None, :]).astype(float)  # tril(L kron L kron L) here
    np.testing.assert_array_equal(np.asarray(zoomed.data)[::-1], expected)


def test_a_picture_is_rendered_once_when_its_page_opens_and_again_on_a_zoom(monkeypatch):
    asked: list[tuple[tuple[float, float], tuple[float, float]]] = []
    picture = MatrixView.picture

    def counted(self, *args, **kwargs):
        asked.append((kwargs["row_range"], kwargs["col_range"]))
        return picture(self, *args, **kwargs)

    monkeypatch.setattr(MatrixView, "picture", counted)
    view = MatrixView(key="A", matrix=np.arange(300 * 500.0).reshape(300, 500), **WORDS)
    pane = pn.pane.HoloViews(zoomable_picture(view))
    model = pane.get_root()
    assert asked == [((0.0, 300.0), (0.0, 500.0))]  # the whole matrix, once
    plot = model.select_one({"type": Plot})
    assert (plot.x_range.start, plot.x_range.end) == (0, 500)
    assert sorted((plot.y_range.start, plot.y_range.end)) == [0, 300]  # row 0 at the top
    pane.object.streams[0].event(x_range=(100, 200), y_range=(10, 30))
    assert asked[1:] == [((10.0, 30.0), (100.0, 200.0))]
    pane._cleanup(model)


SPEC = {"domain": {"a": {"size": 2, "labels": ["no", "yes"]}, "b": {"size": 3}},
        "workload": [{"marginals": {"k": 1}}]}


@pytest.mark.parametrize("noise", ["gaussian", "zcdp"])
@pytest.mark.parametrize("name", ["identity", "hdmm-opt0", "querysmasher"])
def test_count_precision_equals_the_plans_variance_of_that_count(name, noise):
    privacy = ({"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6} if noise == "gaussian"
               else {"noise": "zcdp", "rho": 0.5})
    s = Scenario.from_spec({**SPEC, "privacy": privacy})
    plan = get(name).plan(s.workload, s.privacy)
    views = {v.key: v for v in value_count_views(plan)}
    assert set(views) == {"counts[a]", "counts[b]"}
    assert views["counts[a]"].names == ("no", "yes")
    assert views["counts[b]"].names == ("0", "1", "2")
    # the workload is exactly these five counts, in this order
    shown = np.concatenate([views["counts[a]"].values, views["counts[b]"].values])
    np.testing.assert_allclose(shown, gaussian_half_width(np.sqrt(plan.variances())),
                               rtol=1e-7)


def test_large_strategies_are_pictured_and_diagnostics_marked():
    spec = {"domain": {"x": {"size": 40}, "y": {"size": 30}},
            "workload": [{"marginals": {"k": 2}}],
            "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6}}
    s = Scenario.from_spec(spec)
    plan = get("querysmasher").plan(s.workload, s.privacy)
    views = {v.key: v for v in strategy_views(plan)}
    # 1,200 cells (above the 1,024 listed entry by entry): A is the implicit matrix
    assert views["A"].shape[1] == 1200 and not isinstance(views["A"].matrix, np.ndarray)
    assert views["residual_shares"].values.sum() == pytest.approx(1.0, abs=1e-9)
    assert views["residual_table"].detail and views["timings"].detail
    assert not views["residual"].detail
    folded = {f.key for f in views["residual"].facts if f.detail}
    assert {"gamma", "privacy_cost"} <= folded and "num_residuals" not in folded
    assert views["plan"]["l2"] == pytest.approx(1.0) and "l1" not in views["plan"]


def test_details_are_folded_on_the_page(monkeypatch):
    spec = {**SPEC, "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6}}
    s = Scenario.from_spec(spec)
    plan = get("hdmm-opt0").plan(s.workload, s.privacy)
    page = StrategyPage(session=Session(spec, store=PlanStore()))
    monkeypatch.setattr(page.session, "plan", lambda name: plan)
    column = page._views("hdmm-opt0", None)
    cards = [c for c in column.select(pn.Card) if c.title == DETAILS]
    assert len(cards) == 1 and cards[0].collapsed


def test_sums_of_large_kronecker_products_fall_back_to_signed_means():
    # A^T A of a union strategy: a sum of Kronecker products, 1e6 x 1e6
    L = np.tril(np.ones((1000, 1000)))
    gram = Sum([Kron([Dense(L), Dense(np.eye(1000))]), Kron([Dense(np.eye(1000)), Dense(L)])])
    picture = zoomable_picture(MatrixView(key="gram", matrix=gram, **WORDS))[()]
    assert picture.vdims[0].label == "average of the entries"
    assert picture.data.shape == (PIXELS, PIXELS)
    # block (0, 0): rows and columns 0..2,500 (2.5 outer values); the sum's two terms each
    # have a block mean computed densely from the first 2,500 x 2,500 entries
    dense = (np.kron(L[:3, :3], np.eye(1000)) + np.kron(np.eye(3), L))[:2500, :2500]
    assert np.asarray(picture.data)[::-1][0, 0] == pytest.approx(dense.mean(), rel=1e-9)


def test_a_matrix_that_cannot_be_pictured_gets_a_reason():
    class Opaque(Matrix):
        @property
        def shape(self) -> tuple[int, int]:
            return (10**7, 10**7)

        def matvec(self, x: np.ndarray) -> np.ndarray:
            return np.zeros((10**7,) + np.shape(x)[1:])

    shown = drawable(MatrixView(key="A", matrix=Opaque(), **WORDS))
    assert isinstance(shown, FactsView)
    assert "10,000,000 x 10,000,000 unstructured matrix" in shown["A"]
