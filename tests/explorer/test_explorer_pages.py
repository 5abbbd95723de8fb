"""Compare, strategy, trade-off and learn view-models, rendered without a browser."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import panel as pn
import pytest

from engine.analysis.svd_bound import Bound
from engine.linalg.matrix import Dense
from engine.mechanisms.views import (
    Fact,
    FactsView,
    MatrixView,
    SeriesView,
    TableView,
    WeightsView,
)
from engine.privacy import Privacy, cdp_rho
from engine.scenario import Scenario
from engine.workflows.compare import Comparison
from explorer.components.background import page_loaded
from explorer.components.privacy import PrivacyControls, conversion_text
from explorer.components.table import DataTable
from explorer.pages.compare import (
    TABLE_COLUMNS,
    ComparePage,
    bound_line,
    comparison_frame,
    comparison_table,
    headline,
    query_error_frame,
)
from explorer.pages.learn import TOUR_MECHANISMS, LearnPage
from explorer.pages.strategy import MAX_BARS, StrategyPage, render_view, strategy_views
from explorer.pages.tradeoff import (
    GRIDS,
    TradeoffPage,
    curve_frame,
    halving_sentence,
    marker_frame,
    readout_frame,
    required_frame,
    required_knob,
)
from explorer.planning.store import PlanStore
from explorer.session import Session

PREFIX = {"domain": {"x": {"size": 16, "kind": "numeric"}},
          "workload": [{"product": {"x": "prefix"}}],
          "privacy": {"noise": "laplace", "epsilon": 1.0},
          "mechanisms": ["identity", "h2", "wavelet", "workload"]}


@pytest.fixture
def session() -> Session:
    s = Session(PREFIX, store=PlanStore())
    s.compare_now()
    return s


# ----- compare ------------------------------------------------------------------------------
def test_comparison_table_and_csv_columns(session):
    frame = comparison_frame(session.comparison)
    assert tuple(frame.columns) == TABLE_COLUMNS
    assert list(frame["mechanism"]) == [r.mechanism for r in session.comparison.rows]
    bound = session.comparison.bound_rmse
    assert frame["ratio_to_bound"].tolist() == pytest.approx(
        [r.rmse / bound for r in session.comparison.rows])
    assert tuple(comparison_frame(None).columns) == TABLE_COLUMNS


def test_the_comparison_tables_keep_their_columns_as_rows_arrive(session):
    """The comparison and trade-off tables are made once and take each new comparison in
    place: an empty table, one whose rows are all pending and a full one keep their columns,
    and the rows follow."""
    full = session.comparison
    pending = dataclasses.replace(full, rows=tuple(
        dataclasses.replace(r, plan=None, error="planning") for r in full.rows))
    stages = [pending, dataclasses.replace(full, rows=full.rows[:1]), full]
    compare_table = comparison_table(None)
    readout_table = DataTable(readout_frame(None))
    for table, frame in [(compare_table, comparison_frame), (readout_table, readout_frame)]:
        columns = table.columns
        for stage in stages:
            table.value = frame(stage)
            assert table.columns == columns
        # every mechanism; the readout adds the bound's row
        assert len(table.rows) == len(full.rows) + (frame is readout_frame)
        assert [row[0][0] for row in table.rows] == list(frame(full)["mechanism"])


def test_headline_answers_the_analysts_questions(session):
    text = headline(session.comparison, session.privacy.describe(), True)
    best = session.comparison.best()
    bound = session.comparison.bound_rmse
    assert f"the most accurate mechanism is **{best.mechanism}**" in text
    # people at 95 % first (identity, Laplace eps=1: RMSE 4.123 -> +/- 8.2 people; the bound
    # 2.303 -> 1.96 x 2.303 = +/- 4.5 people), the RMSE beside it
    assert "a typical count is within **+/- 8.2 people**, 95 % of the time" in text
    assert f"(RMSE {best.rmse:.4g} per count)" in text
    assert "**+/- 4.5 people** (the SVD bound, RMSE 2.303)" in text
    assert f"**{best.rmse / bound:.2f}x**" in text
    assert "still planning" in headline(session.comparison, "x", False)
    assert headline(None, "x", True).startswith("No results yet")
    # rows so far are all "not applicable": the headline says so only once planning is over
    refused = dataclasses.replace(session.comparison, rows=tuple(
        dataclasses.replace(r, plan=None, error="not applicable: test")
        for r in session.comparison.rows))
    assert refused.best() is None
    assert headline(refused, "eps=1", False) == (
        "None of the mechanisms planned so far applies to this workload at eps=1 (still "
        "planning the rest).")
    assert headline(refused, "eps=1", True) == "No mechanism applies to this workload at eps=1."


def test_per_query_errors_are_the_plans_variances_worst_first(session):
    frame = query_error_frame(session, "identity")
    # Identity with Laplace(eps=1): prefix query v sums v+1 cells of variance 2 each.
    assert frame["variance"].tolist() == pytest.approx([2.0 * (16 - i) for i in range(16)])
    assert frame["query"][0] == "prefix(x) [15]"
    assert frame["expected_error"][0] == pytest.approx(math.sqrt(32.0))
    with pytest.raises(ValueError, match="no plan"):
        query_error_frame(session, "hb")


def test_per_query_errors_follow_the_slider_by_rescaling(session):
    # computed once per stored plan, then re-scaled: at eps 0.25 every row equals the plan's
    # fresh variances there (Laplace: 16 times those at eps 1), in the same worst-first order
    from explorer.pages.compare import plan_errors

    before = query_error_frame(session, "identity")
    errors = plan_errors(session, "identity")
    session.privacy.epsilon = 0.25
    after = query_error_frame(session, "identity")
    assert plan_errors(session, "identity") is errors
    fresh = session.plan("identity").variances()
    assert after["query"].tolist() == before["query"].tolist()
    rows = [session.workload.query_labels().index(q) for q in after["query"]]
    np.testing.assert_allclose(after["variance"], fresh[rows], rtol=1e-12, atol=0)
    np.testing.assert_allclose(after["variance"], 16.0 * before["variance"], rtol=1e-12)
    np.testing.assert_allclose(after["error_95"], 4.0 * before["error_95"], rtol=1e-12)
    worst = query_error_frame(session, "identity", limit=3)
    assert worst["description"].tolist() == ["total", "x <= 14", "x <= 13"]
    assert worst["expected_error"][0] == pytest.approx(4.0 * math.sqrt(32.0), rel=1e-12)


def test_per_query_view_rescales_in_place_when_eps_moves(session):
    # built once per plan and selection; a slider move changes numbers and bin edges only
    page = ComparePage(session=session)
    page.__panel__()  # watches the session
    session.selected = "identity"
    view = page._per_query_view("identity", session.plans)
    _, _, spread, table, histogram, _ = page._per_query
    edges, counts = histogram.edges.copy(), histogram.counts.copy()
    comparison = page._table
    rmse = comparison.value["rmse"].to_numpy()
    assert counts.sum() == 16 and spread.object.startswith("Errors range from **1.414** to "
                                                           "**5.657** (median 4.121)")
    session.privacy.epsilon = 0.5  # Laplace: every error doubles
    assert page._per_query[3] is table and view[3] is table
    assert page._table is comparison  # the comparison table too, in place
    np.testing.assert_allclose(comparison.value["rmse"], 2.0 * rmse, rtol=1e-12)
    assert comparison.value["mechanism"].tolist() == [r.mechanism for r in
                                                      session.comparison.rows]
    np.testing.assert_allclose(histogram.edges, 2.0 * edges, rtol=1e-12)
    assert histogram.counts.tolist() == counts.tolist()
    fresh = np.sqrt(session.plan("identity").variances())
    np.testing.assert_allclose(table.value["expected_error"], np.sort(fresh)[::-1][:16],
                               rtol=1e-12)
    assert spread.object.startswith("Errors range from **2.828** to **11.31** (median 8.243)")
    session.selected = "hb"  # a new view is built for another mechanism: the old one stays
    session.privacy.epsilon = 0.25
    assert table.value["expected_error"][0] == pytest.approx(2.0 * math.sqrt(32.0), rel=1e-12)


def test_compare_page_renders_and_plans_without_a_server():
    s = Session(PREFIX, store=PlanStore())
    view = ComparePage(session=s).__panel__()
    assert s.complete  # planned on the spot outside a server
    tables = view.select(DataTable)
    assert any(list(t.value.columns) == list(TABLE_COLUMNS) for t in tables)
    downloads = [w.filename for w in view.select(pn.widgets.FileDownload)]
    assert {"comparison.csv", "scenario.yaml", "comparison.py"} <= set(downloads)


# ----- strategy ------------------------------------------------------------------------------
def test_strategy_views_of_a_kronecker_baseline(session):
    views = {v.key: v for v in strategy_views(session.plan("identity"))}
    assert np.array_equal(views["A"].array(), np.eye(16))
    assert np.array_equal(views["gram"].array(), np.eye(16))
    W = session.scenario.workload.dense()
    assert np.allclose(views["recon"].array(), W)  # with A = I, W A+ = W
    assert isinstance(views["factor[x]"], MatrixView) and views["factor[x]"].title == "Part for x"
    facts = views["plan"]
    assert facts["l1"] == 1.0 and facts["mechanism"] == "identity"
    for view in views.values():
        assert isinstance(render_view(view, "#000000"), pn.viewable.Viewable)


def _drawn(view) -> list:
    """The HoloViews elements and tables a rendered view holds."""
    column = render_view(view, "#000000")
    return ([type(p.object) for p in column.select(pn.pane.HoloViews)]
            + [type(t) for t in column.select(DataTable)]
            + [type(t) for t in column.select(pn.pane.DataFrame)])


def test_views_are_drawn_by_their_type():
    import holoviews as hv

    words = {"title": "T", "caption": "What this shows, in words."}
    matrix = MatrixView(key="m", matrix=Dense(np.arange(6.0).reshape(2, 3)), units="weight",
                        row_label="measurement", column_label="cell", **words)
    assert _drawn(matrix) == [hv.DynamicMap]
    few = WeightsView.of({"a": 0.5, "a x b": 2.0, "total": 1.0}, key="w", **words)
    assert _drawn(few) == [hv.Bars]
    many = WeightsView(key="many", names=tuple(map(str, range(MAX_BARS + 1))),
                       values=np.ones(MAX_BARS + 1), units="share", **words)
    assert _drawn(many) == [DataTable]
    table = TableView.of([{"residual": "b", "noise": 0.3}, {"residual": "a x b", "noise": 0.1}],
                         key="t", **words)
    column = render_view(table, "#000000")
    frame = column.select(DataTable)[0].value
    assert list(frame.columns) == ["residual", "noise"] and frame["noise"].tolist() == [0.3, 0.1]
    assert _drawn(SeriesView(key="s", values=np.array([3.0, 2.0, 1.5]), x_label="sweep",
                             **words)) == [hv.Curve]
    facts = FactsView(key="f", facts=(Fact("gap", "certified duality gap (relative)", 2e-8),
                                      Fact("seconds", "time", 1.5, "s")), **words)
    shown = render_view(facts, "#000000").select(pn.pane.DataFrame)[0].object
    assert shown["value"].tolist() == ["2e-08", "1.5 s"]
    assert shown[""].tolist() == ["certified duality gap (relative)", "time"]
    # the caption and units are shown under every view
    text = " ".join(str(m.object) for m in render_view(many, "#000000").select(pn.pane.Markdown))
    assert "What this shows, in words." in text and "Units: share." in text


def test_every_view_of_structured_plans_is_drawn():
    from engine.domain import Domain
    from engine.mechanisms import get
    from engine.workloads import Workload

    W = Workload.marginals(Domain.from_sizes([2, 3, 4], ["a", "b", "c"]), upto=2)
    gauss = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
    for name in ("hdmm", "hdmm-marginals", "eigen-design", "residual-planner", "querysmasher"):
        plan = get(name).plan(W, gauss)
        for view in strategy_views(plan):
            assert isinstance(render_view(view, "#000000"), pn.viewable.Viewable), (name, view)
    marginals = get("hdmm-marginals").plan(W, gauss).view("marginal_weights")
    assert "budget" in marginals.caption and set(marginals.names) <= {
        "TII", "ITI", "IIT", "TTI", "TIT", "ITT", "TTT"}


def test_strategy_page_without_plans_says_what_to_do():
    page = StrategyPage(session=Session(PREFIX, store=PlanStore()))
    assert isinstance(page.__panel__(), pn.viewable.Viewable)


# ----- trade-off -----------------------------------------------------------------------------
def test_curves_are_rescaled_plans_across_the_grid(session):
    frame = curve_frame(session.comparison, session.privacy)
    identity = frame[frame["mechanism"] == "identity"]
    assert identity["x"].tolist() == pytest.approx(GRIDS["epsilon"].tolist())
    plan = session.plan("identity")
    for x, rmse in zip(identity["x"], identity["rmse"], strict=True):
        assert rmse == pytest.approx(plan.rmse(Privacy(noise="laplace", epsilon=x)))
    assert "SVD lower bound" in set(frame["mechanism"])


def test_markers_and_readout_follow_the_live_privacy(session):
    session.privacy.epsilon = 2.0
    markers = marker_frame(session.comparison)
    assert set(markers["x"]) == {2.0}
    readout = readout_frame(session.comparison)
    # Laplace: halving eps doubles every error (said once, not in a column equal on every row)
    assert "increase" not in readout.columns
    assert (readout["error_95_at_half_budget"] / readout["error_95"]).tolist() == pytest.approx(
        [2.0] * len(readout))
    assert readout["mechanism"].iloc[-1] == "SVD lower bound"
    assert readout["error_95"].iloc[-1] == pytest.approx(1.959964 * session.comparison.bound_rmse)
    sentence = halving_sentence(session.comparison)
    assert "halving epsilon from 2 to 1" in sentence and "(x2.00" in sentence
    assert "widens a typical count's error from **+/- " in sentence


def test_required_budget_inverts_the_error(session):
    plan = session.plan("identity")
    # Laplace RMSE is proportional to 1/eps: eps needed = eps_now * rmse_now / target.
    needed = required_knob(plan.budget_for_rmse, session.privacy, 1.0)
    assert needed == pytest.approx(plan.rmse() / 1.0, rel=1e-8)
    frame = required_frame(session.comparison, session.privacy, 1.0)
    assert frame["epsilon_typical"].iloc[0] == pytest.approx(
        frame["epsilon_typical"].min())
    assert frame["mechanism"].iloc[0] == "SVD lower bound"  # the bound needs the least
    assert math.isinf(required_knob(plan.budget_for_rmse, session.privacy, 1e-9))
    assert required_knob(plan.budget_for_rmse, session.privacy, 1e9) == 0.0


def test_required_budget_for_gaussian_and_zcdp():
    s = Session(dict(PREFIX, privacy={"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6}),
                store=PlanStore())
    s.compare_now()
    plan = s.plan("h2")
    eps = required_knob(plan.budget_for_rmse, s.privacy, 2.0)
    assert plan.rmse(s.privacy.with_(epsilon=eps)) == pytest.approx(2.0, rel=1e-6)
    s.privacy.param.update(noise="zcdp", rho=0.5)
    s.compare_now()
    plan = s.plan("h2")
    rho = required_knob(plan.budget_for_rmse, s.privacy, 2.0)
    assert plan.rmse(s.privacy.with_(rho=rho)) == pytest.approx(2.0, rel=1e-6)
    frame = required_frame(s.comparison, s.privacy, 2.0).set_index("mechanism")
    # Gaussian: a typical count within +/- 2 people at 95 % is an RMSE of 2 / 1.96
    rho = frame.loc["h2", "rho_typical"]
    assert plan.rmse(s.privacy.with_(rho=rho)) == pytest.approx(2.0 / 1.959964, rel=1e-5)


def test_privacy_controls_keep_delta_and_its_log_slider_equal():
    privacy = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
    controls = PrivacyControls(privacy=privacy)
    assert controls.delta_exponent == pytest.approx(-6.0)
    controls.delta_exponent = -9.0
    assert privacy.delta == pytest.approx(1e-9)
    controls.delta_exponent = -4.0  # 10 ** -4.0 == 1.0000000000000041e-04 in floating point
    assert privacy.delta == 1e-4 and str(privacy.delta) == "0.0001"
    controls.delta_exponent = -5.25
    assert privacy.delta == 5.62e-6  # three significant digits, as eps and rho
    privacy.delta = 1e-4
    assert controls.delta_exponent == pytest.approx(-4.0)
    assert isinstance(controls.__panel__(), pn.viewable.Viewable)


def test_conversions_are_the_engines():
    text = conversion_text("gaussian", 1.0, 1e-6, 0.5)
    assert f"rho = {cdp_rho(1.0, 1e-6):.4g}" in text
    assert conversion_text("laplace", 2.0, 1e-6, 0.5).endswith("rho = 2 zCDP.")
    assert "implies (eps =" in conversion_text("zcdp", 1.0, 1e-6, 0.5)


def test_tradeoff_page_renders_and_moves_markers_in_place(session):
    page = TradeoffPage(session=session)
    view = page.__panel__()
    assert isinstance(view, pn.viewable.Viewable)
    best = session.comparison.best()
    typical = comparison_frame(session.comparison).set_index("mechanism").loc[
        best.mechanism, "error_95"]
    assert page.model.target == pytest.approx(float(f"{typical / 2:.2g}"))
    figure = page._chart(session.plans, "laplace", session.privacy.delta, "analytic",
                         "people")
    source = page._live.source
    session.privacy.epsilon = 4.0
    assert page._live.figure is figure  # no new chart for a slider move
    assert set(source.data["current_x"]) == {4.0}
    assert page._live.span.location == 4.0


class ClosedTab:
    """A served page's document whose browser loaded it and has gone since."""

    def __init__(self) -> None:
        self.session_context = SimpleNamespace(session=SimpleNamespace(connection_count=0))
        page_loaded(self)


def test_a_closed_tradeoff_tab_keeps_its_drawn_chart_when_the_plans_change(session):
    page = TradeoffPage(session=session)
    page.__panel__()
    drawn = page._chart_pane.object
    handed: list[object] = []
    page._chart_pane.param.watch(lambda event: handed.append(event.new), "object")
    page._doc = ClosedTab()
    # Another page of the session picks up plans. The closed tab's pane is left alone: handed
    # its drawn figure again, a served pane copied the figure's stylesheet models into its own
    # parameters, which failed and broke the other page's build (CI at 26dda8d).
    session.param.trigger("plans")
    assert handed == [] and page._chart_pane.object is drawn


def test_tradeoff_level_follows_the_slider_before_any_plan_arrives(monkeypatch):
    session = Session(PREFIX, store=PlanStore())
    monkeypatch.setattr(session, "compare_now", lambda: None)  # the plans are still coming
    view = TradeoffPage(session=session).__panel__()
    (level,) = [pane for pane in view.select(pn.pane.Markdown)
                if "tradeoff-level" in pane.css_classes]
    assert session.comparison is None
    assert level.object == f"### At your budget\n\nAt **{session.privacy.describe()}**:"
    session.privacy.epsilon = 0.25
    assert level.object.endswith("\n\nAt **laplace eps=0.25**:")


# ----- learn --------------------------------------------------------------------------------
def test_tour_loads_the_classic_example_and_restores_the_users_work():
    # Gaussian noise: HDMM's Laplace optimiser takes minutes on 256 prefixes.
    s = Session(dict(PREFIX, privacy={"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6}),
                store=PlanStore())
    page = LearnPage(session=s)
    assert isinstance(page.__panel__(), pn.viewable.Viewable)
    page.start_tour()
    assert s.scenario.workload.num_queries == 256
    assert s.mechanisms == [m for m in TOUR_MECHANISMS if m in s.param.mechanisms.objects]
    assert s.complete
    page.restore()
    assert s.scenario.workload.num_queries == 16 and s.stash is None


def test_per_query_errors_in_people_with_readable_labels(session):
    frame = query_error_frame(session, "identity")
    # prefix(x) [15] counts x <= 15: 16 cells of Laplace(1) noise, variance 32
    assert frame["description"][0] == "total" and frame["description"][1] == "x <= 14"
    assert frame["error_95"][0] == pytest.approx(4.1344 * math.sqrt(32.0), rel=1e-4)
    assert frame["error_95_method"][0].startswith("bound: Chernoff")
    page = ComparePage(session=session)
    # on the page the method (one per plan) is said once under the table, not in a column
    # pushed past the page's edge
    view = page._per_query_view("identity", session.plans)
    table = next(t for t in view.select(DataTable) if "worst-queries" in t.css_classes)
    assert table.hidden_columns == ["error_95_method"]
    assert any(frame["error_95_method"][0] in m.object for m in view.select(pn.pane.Markdown))
    text = page._in_people("identity", session.comparison, "x <= 3").object
    # x <= 3: four Laplace(1) terms, std sqrt(8) = 2.83; exact 95 % quantile 5.69 (a
    # simulation of 2e6 draws gives 5.695), below the Chernoff bound 11.69
    assert "**x <= 3** under **identity**: within **+/- 5.7 people**" in text
    assert "standard deviation 2.83" in text
    worst = page._in_people("identity", session.comparison, "").object
    assert worst.startswith("The worst query, **total**")
    bad = page._in_people("identity", session.comparison, "x <= 99")
    assert "no query labelled 'x <= 99'" in bad.object


def test_per_query_views_of_a_large_workload_wait_for_the_last_plan(session, monkeypatch):
    import explorer.pages.compare as compare_page

    page = ComparePage(session=session)
    session.mechanisms = [*session.mechanisms, "hb"]  # not planned: planning is not complete
    assert not session.complete
    # 16 queries: below the limit, shown while planning
    assert page._in_people("identity", session.comparison, "").object.startswith(
        "The worst query, **total**")
    monkeypatch.setattr(compare_page, "LIVE_PER_QUERY_LIMIT", 15)
    waiting = page._in_people("identity", session.comparison, "").object
    assert waiting.startswith("The worst query will show once every mechanism is planned")
    assert "16 queries" in waiting
    # a query the user asked for is one variance: shown at once
    assert "standard deviation 2.83" in page._in_people("identity", session.comparison,
                                                        "x <= 3").object
    view = page._per_query_view("identity", session.comparison)
    assert view.object.startswith("Per-query errors will show once every mechanism is planned")
    session.compare_now()
    assert session.complete
    assert page._in_people("identity", session.comparison, "").object.startswith(
        "The worst query, **total**")
    view = page._per_query_view("identity", session.comparison)
    assert "over 16 queries" in view[0].object


def test_exports_describe_themselves(session):
    import io

    import pandas as pd
    import yaml

    from explorer.components.exports import scenario_columns
    from explorer.pages.compare import comparison_description, comparison_report

    # comparison.csv keeps the table's columns; its JSON sidecar says what they are for
    side = comparison_description(session)
    assert side["privacy"] == {"noise": "laplace", "epsilon": 1.0} and side["noise"] == "laplace"
    assert (side["queries"], side["cells"]) == (16, 16)
    assert side["svd_bound_rmse"] == pytest.approx(session.comparison.bound_rmse)
    assert set(side["columns"]) == set(TABLE_COLUMNS)
    per_query = scenario_columns(query_error_frame(session, "identity"), session.privacy,
                                 session.workload).to_csv(index=False)
    table = pd.read_csv(io.StringIO(per_query))
    assert set(table["noise"]) == {"laplace"} and set(table["epsilon"]) == {1.0}
    assert set(table["queries"]) == {16} and table["description"].iloc[0] == "total"
    report = comparison_report(session)
    best = session.comparison.best()
    assert f"<strong>{best.mechanism}</strong>" in report
    assert f"SVD bound {session.comparison.bound_rmse:.4g}" in report
    assert "laplace eps=1" in report and "<svg" in report
    # offline: no script, stylesheet or image is fetched
    assert "<script" not in report and "<link" not in report and "src=" not in report
    scenario = report.split('<pre class="scenario">')[1].split("</pre>")[0]
    assert yaml.safe_load(scenario.replace("&#x27;", "'").replace("&quot;", '"'))[
        "privacy"] == {"noise": "laplace", "epsilon": 1.0}


def test_scenario_yaml_has_no_anchors_empty_products_or_data_dependent_mechanisms():
    from engine.mechanisms import registry_names

    shared = {"x": {"size": 4, "kind": "numeric"}}
    block = {"x": "prefix"}
    spec = {"domain": shared, "workload": [{"product": block}, {"product": block, "weight": 2},
                                           {"product": {}}],
            "privacy": {"noise": "laplace", "epsilon": 1.0}}
    s = Session(spec, store=PlanStore())
    s.mechanisms = list(registry_names())
    text = s.export_yaml()
    assert "&id" not in text and "*id" not in text and "product: {}" not in text
    exported = yaml_load(text)
    assert exported["workload"][2] == {"product": {"x": "total"}}
    assert "aim-grem" not in exported["mechanisms"]
    assert "hdmm" in exported["mechanisms"]
    assert "hierarchical-pgsr" not in exported["mechanisms"]


def yaml_load(text: str):
    import yaml

    return yaml.safe_load(text)


def test_tradeoff_csvs_carry_the_privacy_level_and_workload(session):
    import io

    import pandas as pd

    page = TradeoffPage(session=session)
    view = page.__panel__()
    session.privacy.epsilon = 2.0
    downloads = {w.filename: w for w in view.select(pn.widgets.FileDownload)}
    table = pd.read_csv(io.StringIO(downloads["tradeoff.csv"].callback().getvalue()))
    assert set(table["epsilon"]) == {2.0} and set(table["noise"]) == {"laplace"}
    assert set(table["queries"]) == {16} and set(table["cells"]) == {16}
    assert table["svd_bound_rmse"].tolist() == pytest.approx(
        [session.comparison.bound_rmse] * len(table))
    assert set(table["privacy_unit"]) == {"one record (add/remove one person's row)"}
    needed = page._required(4.0, session.plans, "laplace", session.privacy.delta, "analytic")
    button = next(w for w in needed.select(pn.widgets.FileDownload)
                  if w.filename == "budget-needed.csv")
    table = pd.read_csv(io.StringIO(button.callback().getvalue()))
    assert set(table["target_people_95"]) == {4.0} and set(table["noise"]) == {"laplace"}
    assert set(table["workload"]) == {session.workload.describe()}


def test_mechanism_menus_list_only_planned_mechanisms_best_first():
    from explorer.components.mechanism_choice import planned_mechanisms

    s = Session(dict(PREFIX, mechanisms=["identity", "h2", "wavelet", "workload", "aim-grem"]),
                store=PlanStore())
    s.compare_now()
    names = planned_mechanisms(s.plans)
    rmse = {r.mechanism: r.rmse for r in s.plans.rows if r.rmse is not None}
    assert set(names) == {"identity", "h2", "wavelet", "workload"}  # aim-grem needs data
    assert [rmse[n] for n in names] == sorted(rmse[n] for n in names)
    page = StrategyPage(session=s)
    page.__panel__()
    assert page._choice.options == names and None not in page._choice.options
    page._choice.value = "h2"
    assert s.selected == "h2"
    assert planned_mechanisms(None) == []
    # compare's per-query menu is the same: planned mechanisms, following the selection
    compare = ComparePage(session=s).__panel__()
    menu = next(w for w in compare.select(pn.widgets.Select)
                if "selected-mechanism" in w.css_classes)
    assert menu.options == names and menu.value == "h2"
    menu.value = "wavelet"
    assert s.selected == "wavelet" and page._choice.value == "wavelet"


def test_strategy_facts_say_what_each_number_means(session):
    from explorer.pages.strategy import FACT_MEANINGS, plan_facts

    facts = plan_facts(session.plan("identity"))
    # plain facts first, the sensitivities folded under Details (built when it is expanded):
    # read both tables
    view = render_view(facts, "#000000")
    assert len(view.select(pn.pane.DataFrame)) == 1
    for card in view.select(pn.Card):
        card.collapsed = False
    frame = pd.concat([t.object for t in view.select(pn.pane.DataFrame)])
    by_label = frame.set_index("")
    assert by_label.loc["RMSE (typical error per query)", "what it means"] == FACT_MEANINGS["rmse"]
    assert "Laplace noise is scaled to it" in by_label.loc["L1 sensitivity", "what it means"]
    assert by_label.loc["L1 sensitivity", "value"].startswith("1")  # identity: sensitivity 1


def test_bound_line_says_computing_or_why_there_is_none():
    assert bound_line(None) == "**SVD lower bound:** computing..."
    s = Scenario.from_spec({"domain": {"x": {"size": 16, "kind": "numeric"}},
                            "workload": [{"product": {"x": "prefix"}}]})
    pending = Comparison(s.workload, s.privacy, Bound(None, "pending", "still computing"), ())
    assert bound_line(pending) == "**SVD lower bound:** computing..."
    none = Comparison(s.workload, s.privacy, Bound(None, "none", "too large"), ())
    assert bound_line(none) == "**No SVD bound:** too large."
