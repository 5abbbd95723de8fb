"""The public face (``import engine``) and its notebook objects: compare, plan, Comparison,
Plan, Workload, Privacy and Domain as they show themselves (``_repr_html_``), as tables and as
pictures, with the paper-free closed forms they must reproduce."""

from __future__ import annotations

import math

import holoviews as hv
import numpy as np
import pytest
from scipy import stats

import engine

PREFIX_64 = {"domain": {"age": 64}, "workload": [{"product": {"age": "prefix"}}]}
LAPLACE_1 = {"noise": "laplace", "epsilon": 1.0}
Z95 = float(stats.norm.ppf(0.975))  # 1.959964


def test_every_public_name_resolves() -> None:
    for name in engine.__all__:
        assert getattr(engine, name) is not None, name
    assert {"identity", "h2", "hdmm"} <= set(engine.mechanism_names())


def test_compare_takes_a_spec_like_the_cli() -> None:
    c = engine.compare(PREFIX_64, privacy=LAPLACE_1, mechanisms=["h2", "identity"])
    # identity on 64 prefixes with Laplace eps = 1: tse = 2 * 64**2 * (64 * 65 / 2) / ... ;
    # the RMSE is sqrt(2 * sum_k k / 64) = sqrt(65) = 8.0623 (module doctest value)
    assert [r.mechanism for r in c.ranked()] == ["identity", "h2"]
    assert c.best().rmse == pytest.approx(math.sqrt(65.0), rel=1e-12)
    same = engine.compare(engine.Scenario.from_spec(PREFIX_64),
                          privacy=engine.Privacy(noise="laplace", epsilon=1.0),
                          mechanisms=["identity"])
    assert same.best().rmse == pytest.approx(math.sqrt(65.0), rel=1e-12)


def test_compare_refuses_what_it_cannot_read() -> None:
    with pytest.raises(engine.SpecError, match="domain: missing"):
        engine.compare({"workload": []})
    with pytest.raises(TypeError, match="Workload, a Scenario or a spec mapping"):
        engine.compare(42)


def test_comparison_html_puts_the_bound_first_and_the_best_next() -> None:
    c = engine.compare(PREFIX_64, privacy=LAPLACE_1, mechanisms=["h2", "wavelet", "identity"])
    page = c._repr_html_()
    bound = page.index("SVD lower bound")
    order = [page.index(f">{name}<") for name in ("identity", "wavelet", "h2")]
    assert bound < order[0] < order[1] < order[2]
    assert f"{c.bound_rmse:.4g}" in page
    assert "8.062" in page


def test_error_in_people_is_the_gaussian_quantile_or_the_exact_laplace_one() -> None:
    gauss = engine.compare(PREFIX_64, mechanisms=["identity", "h2"]).to_pandas()
    assert list(gauss.error / gauss.rmse) == pytest.approx([Z95, Z95], rel=1e-12)
    assert set(gauss.error_method) == {"gaussian"}
    # one Laplace term per query (a histogram measured directly): b ln 20 with b = 1/eps
    histogram = {"domain": {"x": 16}, "workload": [{"product": {"x": "identity"}}]}
    single = engine.compare(histogram, privacy=LAPLACE_1, mechanisms=["identity"]).to_pandas()
    assert single.error[0] == pytest.approx(math.log(20.0), rel=1e-9)
    assert single.error_method[0] == "laplace"
    # prefixes from identity: a sum of Laplace terms, between the Gaussian and one Laplace term
    summed = engine.compare(PREFIX_64, privacy=LAPLACE_1, mechanisms=["identity"]).to_pandas()
    ratio = summed.error[0] / summed.rmse[0]
    assert Z95 < ratio < math.log(20.0) / math.sqrt(2.0)
    assert summed.error_method[0] == "laplace-sum"


def test_sweep_is_a_rescale_and_plot_draws_bars_with_the_bound() -> None:
    c = engine.compare(PREFIX_64, privacy=LAPLACE_1, mechanisms=["identity", "h2"])
    table = c.sweep([0.5, 1.0, 2.0])
    assert list(table.columns) == ["epsilon", "SVD bound", "identity", "h2"]
    assert list(table.identity) == pytest.approx([2 * math.sqrt(65.0), math.sqrt(65.0),
                                                  math.sqrt(65.0) / 2], rel=1e-12)
    bars = c.plot()
    assert isinstance(bars, hv.Overlay)
    hline = [el for el in bars if isinstance(el, hv.HLine)][0]
    assert hline.data == pytest.approx(c.bound_rmse, rel=1e-12)
    assert [el for el in bars if isinstance(el, hv.Bars)][0].dimension_values(1)[0] == \
        pytest.approx(math.sqrt(65.0))
    curves = c.plot(epsilons=[0.5, 1.0])
    assert len(curves) == 3


def test_plan_is_the_mechanism_plan_with_its_errors_per_query() -> None:
    p = engine.plan(PREFIX_64, "identity", privacy=LAPLACE_1)
    assert p.rmse() == pytest.approx(math.sqrt(65.0), rel=1e-12)
    # the error at eps = 2 is a rescale: half of it
    assert p.rmse(engine.Privacy(noise="laplace", epsilon=2.0)) == pytest.approx(
        math.sqrt(65.0) / 2, rel=1e-12)
    gaussian = engine.plan(PREFIX_64, "identity")  # Privacy(): gaussian eps 1, delta 1e-6
    table = gaussian.per_query_error()
    assert len(table) == 64 and table["query"][0] == "age 0"
    # the prefix [0, k] sums k + 1 noisy cells: std = sigma sqrt(k + 1), sigma = 4.224679
    assert table["std"][63] == pytest.approx(4.224679 * 8.0, rel=1e-6)
    assert list(table.error / table["std"]) == pytest.approx([Z95] * 64, rel=1e-12)
    assert (table["std"] ** 2).mean() == pytest.approx(gaussian.rmse() ** 2, rel=1e-12)


def test_plan_html_and_picture() -> None:
    p = engine.plan(PREFIX_64, "h2", privacy=LAPLACE_1)
    page = p._repr_html_()
    assert "Plan: h2" in page and f"{p.rmse():.4g}" in page
    image = p.plot()
    assert isinstance(image, hv.Image)
    assert image.data.shape == p.strategy.shape


def test_workload_privacy_and_domain_show_themselves() -> None:
    scenario = engine.Scenario.from_spec(PREFIX_64)
    page = scenario.workload._repr_html_()
    assert "64 queries over 64 cells" in page and "<svg" in page
    # 64 prefixes: one rectangle per row (a run of equal entries), 64 in all
    assert page.count("<rect") == 64
    big = engine.Scenario.from_spec({"domain": {"age": 1000},
                                     "workload": [{"product": {"age": "prefix"}}]})
    assert "<svg" not in big.workload._repr_html_()
    privacy = engine.Privacy()._repr_html_()
    assert "gaussian eps=1 delta=1e-06" in privacy and "4.225" in privacy
    assert "0.5" in engine.Privacy(noise="laplace", epsilon=1.0)._repr_html_()  # eps**2 / 2
    assert "age" in scenario.domain._repr_html_()


def test_the_matrix_picture_stays_small() -> None:
    from engine.html_tables import RECT_LIMIT, grid

    assert grid(np.eye(64)).count("<rect") == 64
    checkerboard = np.indices((64, 64)).sum(axis=0) % 2  # 32 runs of ones in every row
    assert RECT_LIMIT < 64 * 32 and grid(checkerboard) == ""
    assert grid(np.ones((65, 8))) == ""  # more rows than GRID_LIMIT
