"""Issue 29, the analyst's language: errors in people at 95 % first (compare, trade-off,
report, CSVs), the budget for a target in people, number boxes that say what is wrong, and
messages without exception class names."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest

import engine
from engine.errors import SpecError
from engine.workloads import catalog
from explorer.components.exports import PROVENANCE_COLUMNS, described
from explorer.components.messages import NO_DETAILS, plain
from explorer.components.number_box import NumberBox, parse_number, range_problem
from explorer.components.people import (
    GAUSSIAN_FACTOR,
    people,
    people_factor,
    typical_people,
    worst_people,
)
from explorer.pages.compare import (
    ComparePage,
    bars_caption,
    comparison_frame,
    comparison_report,
    per_query_mechanism,
)
from explorer.pages.tradeoff import curve_frame, marker_frame, required_frame, worst_ratios
from explorer.planning.store import PlanStore
from explorer.session import Session

PREFIX = {"domain": {"x": {"size": 16, "kind": "numeric"}},
          "workload": [{"product": {"x": "prefix"}}],
          "mechanisms": ["identity", "h2", "wavelet"]}
GAUSS = {"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6}


@pytest.fixture
def gaussian() -> Session:
    s = Session(dict(PREFIX, privacy=GAUSS), store=PlanStore())
    s.compare_now()
    return s


@pytest.fixture
def laplace() -> Session:
    s = Session(dict(PREFIX, privacy={"noise": "laplace", "epsilon": 1.0}), store=PlanStore())
    s.compare_now()
    return s


# ----- people at 95 % -----------------------------------------------------------------------
def test_people_reads_like_a_sentence():
    assert people(14.3) == "+/- 14 people" and people(8.24) == "+/- 8.2 people"
    assert people(1234.5) == "+/- 1,234 people" and people(None) == "n/a"


def test_gaussian_error_in_people_is_196_times_the_rmse(gaussian):
    frame = comparison_frame(gaussian.comparison).set_index("mechanism")
    for row in gaussian.comparison.rows:
        assert frame.loc[row.mechanism, "error_95"] == pytest.approx(
            1.959964 * row.rmse, rel=1e-6)
        assert frame.loc[row.mechanism, "error_95_method"].startswith("exact: Gaussian")
    # the table's columns: people first, RMSE beside it
    assert list(frame.reset_index().columns[:4]) == ["mechanism", "title", "error_95", "rmse"]


def test_laplace_error_in_people_is_the_exact_quantile_of_a_typical_count(laplace):
    plan = laplace.plan("identity")
    factor, method = people_factor(plan)
    # identity on 16 prefixes: the query nearest the RMSE sums k cells of Laplace(1) noise;
    # the 95 % half-width of such a sum lies between the Gaussian's 1.96 and one Laplace
    # term's ln(20) / sqrt(2) = 2.118 standard deviations
    assert method == "laplace-sum" and 1.96 < factor < 2.118
    assert typical_people(plan) == pytest.approx(factor * plan.rmse(), rel=1e-12)
    # the same factor at every budget: eps 4 divides the error by 4
    laplace.privacy.epsilon = 4.0
    assert people_factor(laplace.plan("identity")) == (factor, method)
    assert typical_people(laplace.plan("identity")) == pytest.approx(
        factor * plan.rmse() / 4, rel=1e-12)


def test_the_trade_off_chart_shows_people_or_rmse(gaussian):
    rmse = curve_frame(gaussian.comparison, gaussian.privacy, "rmse")
    shown = curve_frame(gaussian.comparison, gaussian.privacy, "people")
    assert (shown["rmse"] / rmse["rmse"]).to_numpy() == pytest.approx(1.959964, rel=1e-6)
    markers = marker_frame(gaussian.comparison, "people").set_index("mechanism")
    assert markers.loc["SVD lower bound", "rmse"] == pytest.approx(
        1.959964 * gaussian.comparison.bound_rmse, rel=1e-6)


def test_worst_query_in_people(gaussian):
    plan = gaussian.plan("identity")
    worst, method = worst_people(gaussian, "identity", gaussian.privacy)
    # identity's worst prefix is the total: 16 cells, variance 16 sigma^2
    assert worst == pytest.approx(1.959964 * 4.0 * plan.noise_std(), rel=1e-6)
    assert method.startswith("exact: Gaussian")


# ----- budget for a target in people --------------------------------------------------------
def test_budget_for_a_target_in_people(gaussian):
    frame = required_frame(gaussian.comparison, gaussian.privacy, 3.0,
                           worst_ratios(gaussian, gaussian.comparison)).set_index("mechanism")
    assert list(frame.columns) == ["epsilon_typical", "epsilon_every", "note"]
    for name in ("identity", "h2", "wavelet"):
        plan = gaussian.plan(name)
        eps = frame.loc[name, "epsilon_typical"]
        # at that eps a typical count is within +/- 3 people at 95 %: 1.96 RMSE = 3
        assert 1.959964 * plan.rmse(gaussian.privacy.with_(epsilon=eps)) == pytest.approx(
            3.0, rel=1e-6)
        every = frame.loc[name, "epsilon_every"]
        at = gaussian.privacy.with_(epsilon=every)
        assert worst_people(gaussian, name, at)[0] == pytest.approx(3.0, rel=1e-6)
        assert every > eps  # the worst query needs more budget than a typical one
    # the bound is a floor for both
    bound = frame.loc["SVD lower bound"]
    assert bound["epsilon_typical"] == bound["epsilon_every"]
    assert bound["epsilon_typical"] < frame["epsilon_typical"].drop("SVD lower bound").min()


@pytest.mark.slow
def test_the_issues_budget_example_by_hand():
    """Issue 29: on the analyst's age x sex x race workload, +/- 10 people at 95 % for the
    best mechanism is 1.96 x RMSE = 10 (Gaussian, delta 1e-6): eps 1.5626 for hdmm-opt0, where
    a target RMSE of 10 gave eps 0.7556 (about +/- 19.6 people)."""
    s = Session({**catalog.spec("age_sex_race"), "privacy": GAUSS,
                 "mechanisms": ["hdmm-opt0", "identity"]}, store=PlanStore())
    s.compare_now()
    plan = s.comparison.best().plan
    assert plan.mechanism == "hdmm-opt0"
    by_hand = plan.budget_for_rmse(10.0 / 1.959964, s.privacy)
    frame = required_frame(s.comparison, s.privacy, 10.0).set_index("mechanism")
    assert frame.loc["hdmm-opt0", "epsilon_typical"] == pytest.approx(by_hand, rel=1e-6)
    assert by_hand == pytest.approx(1.5626, abs=5e-4)
    assert plan.budget_for_rmse(10.0, s.privacy) == pytest.approx(0.7556, abs=5e-4)


# ----- number boxes -------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "value"), [("1,000", 1000.0), (" 2.5 ", 2.5), ("1e-3", 0.001),
                                             ("1 000 000", 1e6), ("-5", -5.0)])
def test_typed_numbers_are_read(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(("text", "message"), [("abc", '"abc" is not a number'),
                                               ("", "the box is empty: type a number"),
                                               ("1,2", '"1,2" is not a number'),
                                               ("inf", '"inf" is not a finite number')])
def test_text_that_is_not_a_number_is_named(text, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        parse_number(text)


def test_out_of_range_names_the_allowed_range():
    assert range_problem(-5, 0, None, low_inclusive=False) == "must be more than 0 (got -5)"
    assert range_problem(0, 2, 1_000) == "must be between 2 and 1,000 (got 0)"
    assert range_problem(2.5, 2, 10, integer=True) == "must be a whole number (got 2.5)"
    assert range_problem(10, 2, 10) == "" and range_problem(10, None, 10,
                                                            high_inclusive=False) != ""


def test_a_number_box_keeps_the_typed_text_and_the_value_in_use():
    seen = []
    box = NumberBox(label="values", value=10, low=2, high=1_000, integer=True,
                    on_value=seen.append)
    box.input.value = "-5"
    assert box.value == 10 and box.input.value == "-5" and seen == []
    assert box.problem == "values: must be between 2 and 1,000 (got -5); still using 10."
    box.input.value = "1,000"
    assert box.value == 1000 and box.problem == "" and seen == [1000]
    box.value = 7  # set from outside: the text follows
    assert box.input.value == "7" and seen == [1000]


# ----- no internals -------------------------------------------------------------------------
def test_messages_never_name_exception_classes():
    assert plain(ValueError("1,200,000 queries: listed up to 1,000,000")) == (
        "1,200,000 queries: listed up to 1,000,000")
    assert plain(SpecError("domain.age.size: must be at least 1")) == (
        "domain.age.size: must be at least 1")
    assert plain("ValueError: SpecError: x: bad") == "x: bad"
    assert plain(KeyError("age")) == "unknown name 'age'"
    assert plain(RuntimeError()) == NO_DETAILS


def test_the_bars_caption_describes_only_what_is_drawn(gaussian):
    assert "Dashed line: the SVD lower bound" in bars_caption(gaussian.comparison)
    assert "dashed" not in bars_caption(None).lower()
    assert "No lower bound line" in bars_caption(None)


# ----- exports ------------------------------------------------------------------------------
def test_csvs_and_report_describe_themselves(gaussian):
    frame = described(comparison_frame(gaussian.comparison), gaussian.privacy,
                      gaussian.workload, gaussian.comparison.bound_rmse)
    table = pd.read_csv(io.StringIO(frame.to_csv(index=False)))
    assert list(table.columns[-len(PROVENANCE_COLUMNS):]) == list(PROVENANCE_COLUMNS)
    assert set(table["version"]) == {engine.__version__}
    assert table["svd_bound_error_95"].iloc[0] == pytest.approx(
        GAUSSIAN_FACTOR * gaussian.comparison.bound_rmse)
    assert len(table["workload_sha256"].iloc[0]) == 64
    assert table["created_utc"].iloc[0].endswith("Z")
    # the report's per-query table is the selected mechanism's, as on the page and its CSV
    gaussian.selected = "h2"
    assert per_query_mechanism(gaussian) == "h2"
    report = comparison_report(gaussian)
    assert "per-query-h2.csv" in report and "<strong>h2</strong>" in report
    assert f"dpworkbench {engine.__version__}" in report
    assert table["workload_sha256"].iloc[0] in report
    assert "a typical count is within" in report


def test_the_per_query_csv_is_named_after_its_mechanism(gaussian):
    import panel as pn

    page = ComparePage(session=gaussian)
    view = page._per_query_view("wavelet", gaussian.plans)
    button = next(w for w in view.select(pn.widgets.FileDownload))
    assert button.filename == "per-query-wavelet.csv"
    table = pd.read_csv(io.StringIO(button.callback().getvalue()))
    assert set(table["mechanism"]) == {"wavelet"} and "svd_bound_rmse" in table.columns
    assert not math.isnan(table["error_95"].iloc[0])


def test_no_command_line_advice_and_one_stated_per_query_limit(gaussian, monkeypatch):
    import explorer.pages.compare as compare_page
    import explorer.pages.tradeoff as tradeoff_page

    s = Session(dict(PREFIX, privacy=GAUSS, mechanisms=["identity", "aim-grem"]),
                store=PlanStore())
    s.compare_now()
    note = comparison_frame(s.comparison).set_index("mechanism").loc["aim-grem", "note"]
    assert note == ("not applicable here: it adapts to your data, so it runs on your data on "
                    "the Adaptive page")
    # the limit the pages state is the engine's, in words, without an exception's class name
    monkeypatch.setattr(compare_page, "PER_QUERY_LIMIT", 10)
    view = ComparePage(session=gaussian)._per_query_view("identity", gaussian.plans)
    assert view.object == ("Per-query errors of identity are not available: per-query errors "
                           "are computed for up to 10 queries; this workload has 16")
    monkeypatch.setattr(tradeoff_page, "PER_QUERY_LIMIT", 10)
    frame = required_frame(gaussian.comparison, gaussian.privacy, 3.0,
                           worst_ratios(gaussian, gaussian.comparison)).set_index("mechanism")
    assert frame.loc["identity", "note"] == (
        "every count: per-query errors are computed for up to 10 queries")
    assert math.isnan(frame.loc["identity", "epsilon_every"])


def test_a_missing_view_says_why(gaussian):
    page = ComparePage(session=gaussian)
    assert page._in_people(None, gaussian.comparison, "").object == (
        "No query errors to show: no mechanism is picked yet.")
    assert page._in_people("hdmm", gaussian.comparison, "").object == (
        "No query errors to show: hdmm has no plan (not applicable here, or not planned yet).")
