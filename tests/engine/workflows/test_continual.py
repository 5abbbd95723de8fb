"""The price of continual release, read off a comparison on prefix sums (issue 33 item 2).

Closed forms on 12 periods under Gaussian noise at eps = 1, delta = 1e-6 (sigma = 4.224679 per
unit L2 sensitivity): identity's period-k count sums k noisy cells, std sigma sqrt(k), RMSE
sigma sqrt(6.5); measuring every prefix sum itself (the ``workload`` strategy, L2 sensitivity
sqrt(12)) gives every period std sigma sqrt(12). Renamed ``online-...``, that strategy (which
is causal) stands for an online mechanism, so the selection and the ratio are checked without
depending on which online families are registered.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

import engine
from engine.workflows import continual

SIGMA = 4.224679  # analytic Gaussian, eps = 1, delta = 1e-6, unit L2 sensitivity
Z95 = float(stats.norm.ppf(0.975))


@pytest.fixture(scope="module")
def twelve() -> engine.Comparison:
    """identity, h2 and the workload strategy (renamed online-workload) on 12 periods."""
    c = engine.compare(engine.continual_spec(12), mechanisms=["identity", "workload", "h2"])
    rows = tuple(dataclasses.replace(r, mechanism="online-workload")
                 if r.mechanism == "workload" else r for r in c.rows)
    return engine.Comparison(c.workload, c.privacy, c.bound, rows)


def test_the_spec_is_every_prefix_sum_of_one_ordered_attribute() -> None:
    spec = engine.continual_spec()
    assert spec == {"domain": {"month": {"size": 120, "kind": "numeric"}},
                    "workload": [{"product": {"month": "prefix"}}]}
    workload = engine.Scenario.from_spec(spec).workload
    assert (workload.num_queries, workload.domain.size) == (120, 120)
    assert engine.is_continual(workload)
    with pytest.raises(ValueError, match="periods: must be at least 1"):
        engine.continual_spec(0)


@pytest.mark.parametrize("spec", [
    {"domain": {"t": {"size": 8, "kind": "numeric"}},
     "workload": [{"product": {"t": "all_range"}}]},
    {"domain": {"t": {"size": 8, "kind": "numeric"}, "sex": 2},
     "workload": [{"product": {"t": "prefix"}}]},
    {"domain": {"t": {"size": 8, "kind": "numeric"}},
     "workload": [{"product": {"t": "prefix"}}, {"product": {"t": "identity"}}]},
])
def test_other_workloads_are_not_continual_and_get_a_one_line_error(spec) -> None:
    c = engine.compare(spec, mechanisms=["identity"])
    assert not engine.is_continual(c.workload)
    with pytest.raises(ValueError, match="^workload: continual release needs the prefix sums"):
        engine.price_of_continual_release(c)


def test_online_names() -> None:
    assert engine.is_online("online-tree") and not engine.is_online("hdmm-opt0")
    assert all(name.startswith("online-") for name in engine.online_mechanisms())
    assert set(engine.online_mechanisms()) <= set(engine.mechanism_names())


def test_per_period_errors_are_the_closed_forms(twelve) -> None:
    price = engine.price_of_continual_release(twelve)
    table = price.per_period()
    assert list(table.columns) == ["period", "online-workload", "h2", "identity"]
    assert table["period"].tolist() == list(range(1, 13))
    k = np.arange(1, 13)
    assert table["identity"].to_numpy() == pytest.approx(Z95 * SIGMA * np.sqrt(k), rel=1e-6)
    assert table["online-workload"].to_numpy() == pytest.approx(
        np.full(12, Z95 * SIGMA * math.sqrt(12)), rel=1e-6)
    # h2 is exact too: level sums of the binary tree, least squares; its last period (the
    # total of all 12) is answered better than identity's 12-cell sum
    assert table["h2"].iloc[-1] < table["identity"].iloc[-1]


def test_the_price_is_best_online_over_best_offline(twelve) -> None:
    price = engine.price_of_continual_release(twelve)
    assert (price.offline.mechanism, price.online.mechanism) == ("h2", "online-workload")
    h2 = next(r.rmse for r in twelve.rows if r.mechanism == "h2")
    assert price.ratio == pytest.approx(SIGMA * math.sqrt(12) / h2, rel=1e-6)
    assert price.ratio == pytest.approx(1.8210, abs=5e-4)  # sqrt(12 / 3.61873)
    summary = price.summary().set_index("mechanism")
    assert summary.loc["online-workload", "online"] and not summary.loc["h2", "online"]
    assert summary.loc["identity", "ratio_to_offline"] == pytest.approx(
        math.sqrt(6.5 / 3.6187256), rel=1e-6)
    assert summary.loc["identity", "max_error"] == pytest.approx(Z95 * SIGMA * math.sqrt(12),
                                                                 rel=1e-6)
    assert summary.loc["identity", "last_error"] == summary.loc["identity", "max_error"]
    assert (summary["ratio_to_bound"] >= 1.0 - 1e-9).all()
    assert price.headline() == (
        f"Publishing every month costs 1.82 times the error of publishing once (offline "
        f"optimum: h2, RMSE {h2:,.2f} people; best online: online-workload, RMSE "
        f"{SIGMA * math.sqrt(12):,.2f} people).")
    assert "**1.82 times**" in price.headline(markdown=True)


def test_without_online_rows_the_headline_says_why(twelve, monkeypatch) -> None:
    offline = engine.Comparison(twelve.workload, twelve.privacy, twelve.bound,
                                tuple(r for r in twelve.rows if r.mechanism != "online-workload"))
    price = engine.price_of_continual_release(offline)
    assert price.online is None and price.ratio is None
    monkeypatch.setattr(continual, "online_mechanisms", lambda: ())
    assert price.headline().startswith("No online mechanism is registered in this workbench")
    assert "offline optimum: h2, RMSE 8.04 people" in price.headline()
    monkeypatch.setattr(continual, "online_mechanisms", lambda: ("online-tree",))
    assert price.headline().startswith(
        "No online mechanism has been planned in this comparison (registered: online-tree)")


def test_without_any_plan_there_is_nothing_to_compare_against(twelve) -> None:
    empty = engine.Comparison(twelve.workload, twelve.privacy, twelve.bound, ())
    price = engine.price_of_continual_release(empty)
    assert price.offline is None and price.rows() == ()
    assert price.headline().startswith("No offline mechanism could be planned on these 12")
    assert price.per_period().columns.tolist() == ["period"]


def test_the_picture_has_one_curve_per_mechanism(twelve) -> None:
    picture = engine.price_of_continual_release(twelve).plot()
    curves = {c.label: c for c in picture}
    assert set(curves) == {"online-workload", "h2", "identity"}
    assert curves["identity"].dimension_values("error_95") == pytest.approx(
        Z95 * SIGMA * np.sqrt(np.arange(1, 13)), rel=1e-6)


def test_when_the_online_mechanisms_refuse_the_noise_the_headline_says_why(twelve) -> None:
    refused = engine.ComparisonRow("online-sqrt", "Online square root", None,
                                   "not applicable: online-sqrt supports gaussian, zcdp noise, "
                                   "not laplace")
    rows = (*(r for r in twelve.rows if r.mechanism != "online-workload"), refused)
    price = engine.price_of_continual_release(
        engine.Comparison(twelve.workload, twelve.privacy, twelve.bound, rows))
    assert price.online is None
    assert price.headline() == (
        "No online mechanism applies here (not applicable: online-sqrt supports gaussian, "
        "zcdp noise, not laplace), so the price of publishing every month cannot be shown; "
        "publishing once, the offline optimum: h2, RMSE 8.04 people.")
