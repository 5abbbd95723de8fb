"""Issue 17 item 3: every readout follows every control, invalid values are refused in words,
eps sits on a log slider, one mechanism can be highlighted, equal lines are told apart."""

from __future__ import annotations

import math

import panel as pn
import pytest

from engine.privacy import Privacy, cdp_rho
from explorer.components.charts import (
    BOUND_LABEL,
    FADED_ALPHA,
    GAUSSIAN_95,
    LiveBarsChart,
    same_curves,
)
from explorer.components.privacy import PrivacyControls
from explorer.pages.compare import ComparePage
from explorer.pages.tradeoff import TradeoffPage, curve_frame, readout_frame
from explorer.planning.store import PlanStore
from explorer.session import Session

# Prefix sums over 8 cells: identity's Laplace error at eps = 1 is exactly 3 (variance 2 per
# cell, 4.5 cells per query on average), and hb picks branching 8 there, i.e. identity.
PREFIX8 = {"domain": {"x": {"size": 8, "kind": "numeric"}},
           "workload": [{"product": {"x": "prefix"}}],
           "privacy": {"noise": "laplace", "epsilon": 1.0},
           "mechanisms": ["identity", "hb", "h2"]}


@pytest.fixture
def session() -> Session:
    s = Session(PREFIX8, store=PlanStore())
    s.compare_now()
    return s


def test_the_conversion_line_follows_every_control():
    # It once froze on "Pure eps = 0.741 (Laplace) ..." after an eps move and a noise switch
    # within 0.3 s, and lagged ~5 s behind the page's slow views; it is now computed in the
    # same update as the level (under a millisecond), so every change shows at once.
    privacy = Privacy(noise="gaussian", epsilon=5.99, delta=1e-6)
    layout = PrivacyControls(privacy=privacy).__panel__()
    line = next(m for m in layout.select(pn.pane.Markdown)
                if "privacy-conversion" in m.css_classes)

    def shown() -> str:
        return line.object

    assert shown().startswith("delta = 1.0e-06. ")
    assert f"rho = {cdp_rho(5.99, 1e-6):.4g}" in shown()
    privacy.param.update(noise="laplace", epsilon=1.0)
    assert shown() == "Pure eps = 1 (Laplace) implies rho = 0.5 zCDP."
    privacy.param.update(noise="gaussian", epsilon=2.0, delta=1e-5)
    assert shown().startswith("delta = 1.0e-05. ")
    assert f"rho = {cdp_rho(2.0, 1e-5):.4g}" in shown()


@pytest.mark.parametrize(("typed", "why"), [("0", "must be more than 0 (got 0)"),
                                            ("-5", "must be more than 0 (got -5)"),
                                            ("abc", '"abc" is not a number'),
                                            ("", "the box is empty: type a number"),
                                            ("inf", '"inf" is not a finite number')])
def test_invalid_eps_is_refused_with_a_message_and_the_last_valid_level_kept(typed, why):
    privacy = Privacy(noise="laplace", epsilon=0.5)
    controls = PrivacyControls(privacy=privacy)
    box = controls._inputs["epsilon"]
    box.input.value = typed
    assert privacy.epsilon == 0.5
    assert controls.problem == f"eps: {why}; still using 0.5."
    # what was typed stays to be corrected
    assert box.input.value == typed
    box.input.value = "2"
    assert privacy.epsilon == 2.0 and controls.problem == ""
    assert controls.epsilon_exponent == pytest.approx(math.log10(2.0), abs=1e-12)


def test_eps_slider_is_logarithmic_and_follows_the_level_both_ways():
    privacy = Privacy(noise="laplace", epsilon=1.0)
    controls = PrivacyControls(privacy=privacy)
    assert controls.param.epsilon_exponent.bounds == (-2.0, 1.0)
    controls.epsilon_exponent = -1.5  # 10**-1.5 = 0.0316...
    assert privacy.epsilon == 0.0316
    assert controls._inputs["epsilon"].input.value == "0.0316"
    privacy.epsilon = 5.0
    assert controls.epsilon_exponent == pytest.approx(math.log10(5.0), abs=1e-12)
    privacy.epsilon = 100.0  # typed beyond the slider: the slider sits at its end
    assert controls.epsilon_exponent == 1.0 and privacy.epsilon == 100.0
    controls.rho_exponent = 0.0
    assert privacy.rho == 1.0
    assert isinstance(controls.__panel__(), pn.viewable.Viewable)


@pytest.mark.parametrize(("typed", "message"), [
    ("0", 'must be more than 0 (got 0)'), ("-5", "must be more than 0 (got -5)"),
    ("abc", '"abc" is not a number'), ("", "the box is empty: type a number")])
def test_a_refused_target_keeps_the_typed_text_and_says_why(session, typed, message):
    page = TradeoffPage(session=session)
    page.__panel__()
    box = page.target_box
    in_use = page.model.target
    assert in_use is not None and box.input.value == f"{in_use:g}"
    box.input.value = typed
    assert page.model.target == in_use and box.input.value == typed  # no silent revert
    assert box.problem == (f"Target error (+/- people, 95 %): {message}; still using "
                           f"{in_use:g}.")
    box.input.value = "1,000"  # a thousands separator is read, not refused
    assert page.model.target == 1000.0 and box.problem == ""


def curve_styles(page: TradeoffPage, style: str) -> dict:
    """One drawing property (``dash``, ``alpha``...) of each curve on the page's chart, by
    mechanism, in drawing order."""
    data = page._live.curves.data
    return dict(zip(data["mechanism"], data[style], strict=True))


def test_identity_and_hb_share_a_line_and_are_told_apart(session):
    readout = readout_frame(session.comparison).set_index("mechanism")
    assert readout.loc["identity", "rmse"] == pytest.approx(3.0, rel=1e-12)
    assert readout.loc["hb", "rmse"] == pytest.approx(3.0, rel=1e-12)
    assert readout.loc["hb", "note"] == "same error as identity"
    assert readout.loc["identity", "note"] == "" and readout.loc["h2", "note"] == ""
    assert same_curves(curve_frame(session.comparison, session.privacy)) == {
        "hb": ("identity", 1)}

    page = TradeoffPage(session=session)
    page.__panel__()
    page._chart(session.plans, "laplace", session.privacy.delta, "analytic", "rmse")
    styles = curve_styles(page, "dash")
    assert styles["identity"] == "solid" and styles["hb"] == "dotted"
    labels = [item.label.value for item in page._live.figure.legend[0].items]
    assert "hb (same as identity)" in labels

    # the best line lies on top of the ones it nearly equals, the bound above all; the legend
    # lists them best first
    best_first = [r.mechanism for r in session.comparison.rows if r.rmse is not None]
    assert best_first[0] == "identity"
    drawn = list(curve_styles(page, "dash"))
    assert drawn == [*reversed(best_first), BOUND_LABEL]
    assert [label.split(" (")[0] for label in labels] == [*best_first, BOUND_LABEL]


def test_a_chosen_row_highlights_one_mechanism(session):
    page = TradeoffPage(session=session)
    page.__panel__()
    page._chart(session.plans, "laplace", session.privacy.delta, "analytic", "rmse")

    def alphas() -> dict[str, float]:
        return {name: alpha for name, alpha in curve_styles(page, "alpha").items()
                if name != BOUND_LABEL}

    page.highlight("h2")
    assert page.model.highlighted == "h2"
    assert alphas() == {"identity": FADED_ALPHA, "hb": FADED_ALPHA, "h2": 1.0}
    page._chart(session.plans, "laplace", session.privacy.delta, "analytic", "rmse")  # redrawn
    assert alphas()["h2"] == 1.0 and alphas()["identity"] == FADED_ALPHA
    page.highlight(None)
    assert set(alphas().values()) == {1.0}


def bar_column(chart: LiveBarsChart, column: str) -> dict[str, float]:
    """One column of the bars' data (``alpha``, ``rmse``...) by mechanism."""
    data = chart.source.data
    return dict(zip(data["mechanism"], data[column], strict=True))


def bar_alphas(chart: LiveBarsChart) -> dict[str, float]:
    return bar_column(chart, "alpha")


def test_a_legend_click_highlights_one_bar_and_a_second_click_shows_all(session):
    picked: list[str | None] = []
    chart = LiveBarsChart(session.comparison, on_pick=picked.append)
    assert chart.mechanisms == ("identity", "hb", "h2")  # best first; hb ties identity at 3
    labels = [item.label.value for item in chart.figure.legend[0].items]
    bound = session.comparison.bound_rmse
    assert labels == ["identity", "hb", "h2", f"{BOUND_LABEL}: +/- {GAUSSIAN_95 * bound:,.1f}"]
    chart.pick("h2")
    assert bar_alphas(chart) == {"identity": FADED_ALPHA, "hb": FADED_ALPHA, "h2": 1.0}
    assert bar_column(chart, "outline") == {"identity": 0.0, "hb": 0.0, "h2": 1.0}
    chart.pick("h2")
    assert set(bar_alphas(chart).values()) == {1.0} and picked == ["h2", None]


def test_a_new_privacy_level_rescales_the_bars_in_place(session):
    chart = LiveBarsChart(session.comparison)
    figure = chart.figure
    session.privacy.epsilon = 2.0
    assert chart.fits(session.comparison)
    chart.rescale(session.comparison)
    heights = bar_column(chart, "rmse")
    assert heights["identity"] == pytest.approx(1.5, rel=1e-12)  # 3 at eps 1, halved at eps 2
    # bars and bound in people at 95 %: 1.959964 x RMSE (the chart's default factor)
    assert bar_column(chart, "people")["identity"] == pytest.approx(1.959964 * 1.5, rel=1e-6)
    assert chart.span.location == pytest.approx(1.959964 * session.comparison.bound_rmse,
                                                rel=1e-6)
    assert chart.figure is figure


def test_compare_page_highlights_from_the_table_and_keeps_it_across_levels(session):
    page = ComparePage(session=session)
    page.__panel__()
    page.highlight("hb")
    assert page.highlighted == "hb"
    session.privacy.epsilon = 0.5
    assert page.highlighted == "hb" and bar_alphas(page._bars)["identity"] == FADED_ALPHA
    table = page._table
    assert table.selection == [list(table.value["mechanism"]).index("hb")]
    assert len(table.value) == 3  # every mechanism has its row
