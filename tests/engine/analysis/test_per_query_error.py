"""Errors in people: readable query labels and each query's error at 95 %."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest

from engine.analysis import per_query_error
from engine.analysis.per_query_error import (
    PerQueryErrors,
    chernoff_half_width,
    error_half_widths,
    laplace_sum_half_width,
    query_error,
)
from engine.errors import SpecError
from engine.mechanisms import get
from engine.mechanisms.base import Plan
from engine.privacy import Privacy
from engine.scenario import Scenario
from engine.workloads import catalog
from engine.workloads import labels as labels_module
from engine.workloads.labels import find_query, readable_labels

SPEC = catalog.spec("age_sex_race")
LAPLACE = Privacy(noise="laplace", epsilon=1.0)
GAUSS = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)


def test_labels_read_in_the_domains_values() -> None:
    w = Scenario.from_spec(SPEC).workload
    labels = readable_labels(w)
    assert len(labels) == w.num_queries == 1014 and len(set(labels)) == 1014
    # prefix(age): age <= v; its last query counts everyone
    assert labels[:3] == ["age 0", "age <= 1", "age <= 2"] and labels[99] == "total"
    # marginal(age, sex) [49] is the female count of age 24
    assert labels[100 + 49] == "age 24, sex female"
    assert labels[-1] == "sex female, race multi"
    assert find_query(w, "Age 24,  sex FEMALE") == 149
    with pytest.raises(SpecError, match="no query labelled 'sex femal, race multi'.*did you"):
        find_query(w, "sex femal, race multi")


def test_labels_are_built_once_when_asked_from_several_threads(monkeypatch) -> None:
    # A served page asks for them from two worker threads as a plan arrives: the second
    # waits for the first build instead of building 600,000 labels again.
    w = Scenario.from_spec(SPEC).workload
    builds = []
    started = threading.Event()

    def slow_build(workload):
        builds.append(workload)
        started.set()
        time.sleep(0.2)
        return build(workload)

    build = labels_module._labels
    monkeypatch.setattr(labels_module, "_labels", slow_build)
    results: list[list[str]] = []
    first = threading.Thread(target=lambda: results.append(readable_labels(w)))
    first.start()
    started.wait(5)
    second = readable_labels(w)
    first.join()
    assert len(builds) == 1 and results[0] == second and len(second) == 1014
    assert second[100 + 49] == "age 24, sex female"


def test_labels_of_ranges_bins_and_repeated_totals() -> None:
    spec = {"domain": {"income": {"bin_edges": [0, 10, 20, 50]}, "region": 3},
            "workload": [{"product": {"income": {"block": "range", "width": 2}}},
                         {"product": {"region": "total"}}, {"product": {"income": "total"}}]}
    labels = readable_labels(Scenario.from_spec(spec).workload)
    assert labels[:2] == ["income < 20", "income [10, 50)"]
    assert labels[2].startswith("total (") and labels[3].startswith("total (")
    assert labels[2] != labels[3]


def test_gaussian_half_width_is_the_exact_quantile() -> None:
    w = Scenario.from_spec(SPEC).workload
    plan = get("identity").plan(w, GAUSS)
    e = query_error(plan, "age <= 29")  # 30 ages x 14 cells of variance sigma**2
    assert e.std == pytest.approx(GAUSS.sigma() * math.sqrt(30 * 14), rel=1e-12)
    assert e.half_width == pytest.approx(1.959963985 * e.std, rel=1e-9)
    assert e.method == "gaussian" and e.index == 29
    widths, method = error_half_widths(plan)
    assert method == "gaussian" and widths[29] == pytest.approx(e.half_width, rel=1e-12)


def test_laplace_single_term_and_sums_are_exact() -> None:
    w = Scenario.from_spec(SPEC).workload
    plan = get("identity").plan(w, LAPLACE)
    # a 2-way (sex, race) cell sums 100 identity cells: a sum of 100 Laplace(1) terms
    e = query_error(plan, "sex female, race multi")
    assert e.method == "laplace-sum" and e.std == pytest.approx(math.sqrt(200.0), rel=1e-9)
    assert 1.95 * e.std < e.half_width < 1.97 * e.std  # close to Gaussian, not equal
    single = query_error(plan, "age 0")  # prefix(age) at 0: 14 cells
    assert single.std == pytest.approx(math.sqrt(28.0), rel=1e-9)
    # one Laplace(b) term: b ln 20 exactly
    assert laplace_sum_half_width(np.array([3.0])) == pytest.approx(3.0 * math.log(20.0))


def test_laplace_sum_quantile_matches_simulation() -> None:
    rng = np.random.default_rng(7)
    scales = np.array([1.0, 1.0])
    exact = laplace_sum_half_width(scales)
    draws = np.abs(rng.laplace(0.0, 1.0, (1_000_000, 2)).sum(axis=1))
    assert exact == pytest.approx(np.quantile(draws, 0.95), rel=4e-3)
    assert exact == pytest.approx(4.1130, abs=2e-3)
    # the Chernoff bound holds for it and is larger than one Laplace term's quantile
    bound = float(chernoff_half_width(2.0))  # std of the sum of two Laplace(1): 2
    assert bound > exact and bound == pytest.approx(8.2689, abs=2e-3)


@pytest.mark.parametrize("mechanism", ["hb", "hdmm-marginals"])
@pytest.mark.parametrize("privacy, moved, ratio", [
    (LAPLACE, Privacy(noise="laplace", epsilon=0.37), 1.0 / 0.37),  # std ~ 1 / eps
    (Privacy(noise="zcdp", rho=0.5), Privacy(noise="zcdp", rho=0.02), 5.0),  # ~ 1 / sqrt(rho)
    (GAUSS, Privacy(noise="gaussian", epsilon=3.0, delta=1e-9), None),
])
def test_per_query_errors_rescale_to_a_fresh_computation(mechanism, privacy, moved,
                                                         ratio) -> None:
    # A slider move re-scales what was computed once per plan: every value equals the one
    # computed afresh at the new level, to rounding.
    w = Scenario.from_spec(SPEC).workload
    plan = get(mechanism).plan(w, privacy)
    errors = PerQueryErrors(plan)
    first = errors.std(privacy)
    fresh = plan.with_privacy(moved)
    fresh_half_widths, method = error_half_widths(fresh)
    np.testing.assert_allclose(errors.std(moved), np.sqrt(fresh.variances()), rtol=1e-12, atol=0)
    np.testing.assert_allclose(errors.half_widths(moved), fresh_half_widths, rtol=1e-12, atol=0)
    assert errors.method(moved) == method
    if ratio is not None:
        np.testing.assert_allclose(errors.std(moved) / first, ratio, rtol=1e-12)
    # worst first at any level: the fresh errors read in the cached order never increase
    order = errors.worst_first()
    assert np.all(np.diff(np.sqrt(fresh.variances())[order]) <= 1e-12 * first.max())
    assert np.sort(order).tolist() == list(range(w.num_queries))
    assert errors.worst() == int(np.argmax(fresh.variances())) == order[0]
    assert errors.median_std(moved) == pytest.approx(np.median(np.sqrt(fresh.variances())),
                                                     rel=1e-12)
    # one query by its label: the cached quantile re-scaled; Gaussian quantiles are exact
    # to rounding, Laplace sums come from quadrature (solved to 1e-9 of the std)
    errors.query("age 24, sex female", privacy)
    again = errors.query("age 24, sex female", moved)
    direct = query_error(fresh, "age 24, sex female")
    tolerance = 1e-12 if method == "gaussian" else 1e-8
    assert (again.index, again.label, again.method) == (direct.index, direct.label,
                                                         direct.method)
    assert again.std == pytest.approx(direct.std, rel=1e-12)
    assert again.half_width == pytest.approx(direct.half_width, rel=tolerance)
    with pytest.raises(ValueError, match="privacy: .* noise, but the plan is for"):
        errors.std(GAUSS if privacy.noise == "laplace" else LAPLACE)


def test_a_plan_has_everything_the_per_query_error_reads() -> None:
    """The module's Plan protocol states what the analysis reads of a plan (so that it
    imports nothing from the mechanisms); the mechanisms' Plan has each field and method."""
    protocol = per_query_error.Plan
    fields = set(protocol.__annotations__)
    methods = {name for name, value in vars(protocol).items()
               if callable(value) and not name.startswith("_")}
    assert fields == {"privacy", "workload", "strategy", "sensitivity"}
    assert methods == {"variances", "unit_variances", "noise_std", "rmse", "with_privacy",
                       "noise_free"}
    assert fields <= set(Plan.__dataclass_fields__)
    assert all(callable(getattr(Plan, name)) for name in methods)
