"""The Adaptive (data-dependent) page's view-model, without a browser."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from engine.data import load_adult
from engine.privacy import cdp_rho
from explorer.pages.adaptive import ADULT, UPLOAD, AdaptivePage, parse_domain

SMALL = ["age", "sex", "race", "workclass"]


def test_defaults_and_title():
    page = AdaptivePage()
    assert page.title == "Adaptive (data-dependent)"
    assert page.dataset == ADULT and page.way == 2 and page.post_processing == "raw"
    assert "income>50K" in page.param.attributes.objects


def test_run_on_adult_compares_with_residual_planner():
    page = AdaptivePage(attributes=SMALL, max_rounds=15, epsilon=1.0, delta=1e-9)
    page.run()
    assert page.error == "" and not page.running
    rho = cdp_rho(1.0, 1e-9)
    frame = page.results_frame()
    assert list(frame["method"]) == ["AIM+GReM", "ResidualPlanner (batch)"]
    for spent in frame["rho spent"]:
        assert abs(spent - rho) <= 1e-12 * rho
    assert {"mean L1 (counts)", "mean L1 / N", "max L1 (counts)", "mean L2 / N"} <= set(frame)
    assert frame["mean L1 / N"].iloc[0] == pytest.approx(
        frame["mean L1 (counts)"].iloc[0] / load_adult().records)
    rounds = page.rounds_frame()
    assert 1 <= len(rounds) <= 15 and page.progress == pytest.approx(100.0)
    assert rounds["rho_used"].iloc[-1] == pytest.approx(rho, rel=1e-12)
    assert {"round", "marginal", "workload_error"} <= set(rounds)
    csv = page.csv_export().getvalue()
    # one plain CSV table (issue 17: no '#' comment lines), the two parts in a column
    assert "AIM+GReM" in csv and not any(line.startswith("#") for line in csv.splitlines())
    table = pd.read_csv(io.StringIO(csv))
    assert list(table.columns[:1]) == ["table"]
    assert (table["table"] == "AIM+GReM rounds").sum() == len(rounds)
    assert table["rho_used"].dropna().iloc[-1] == pytest.approx(rho, rel=1e-12)
    assert set(table["epsilon"]) == {1.0} and set(table["delta"]) == {1e-9}
    assert len(page.chart()) == 3


def test_post_processing_choice_is_labelled_in_the_table():
    page = AdaptivePage(attributes=["sex", "race"], max_rounds=5, compare_rp=False,
                        post_processing="clip")
    page.run()
    assert list(page.results_frame()["post-processing"]) == ["clip"]


def test_upload_needs_a_public_domain():
    page = AdaptivePage(dataset=UPLOAD, csv_file=b"a,b\n0,1\n1,1\n")
    page.run()
    assert page.error.startswith("SpecError") and "never inferred" in page.error
    assert page.results == [] and not page.running


def test_uploaded_csv_with_domain(tmp_path):
    rows = "a,b,c\n" + "".join(f"{i % 3},{(i // 3) % 2},{i % 2}\n" for i in range(300))
    domain = json.dumps({"a": 3, "b": 2, "c": {"size": 2, "labels": ["0", "1"]}})
    page = AdaptivePage(dataset=UPLOAD, csv_file=rows.encode(), domain_file=domain.encode(),
                        domain_name="domain.json", attributes=[], max_rounds=8)
    page.run()
    assert page.error == ""
    assert len(page.results) == 2 and len(page.rounds) >= 1
    assert list(parse_domain("a: 3\nb: 2\n", "domain.yaml").names) == ["a", "b"]


def test_too_few_attributes_is_a_one_line_error():
    page = AdaptivePage(attributes=["sex", "race"], way=3)
    page.run()
    assert "3-way marginals need at least 3 attributes" in page.error
    assert "\n" not in page.error


def test_cancel_from_another_thread_releases_nothing():
    page = AdaptivePage(attributes=SMALL)
    page.start()
    page.cancel()
    page.wait(60)
    assert not page.running
    assert page.status.startswith("Cancelled") or page.status.startswith("Done")
    if page.status.startswith("Cancelled"):
        assert page.results == []


def test_view_builds_without_a_server():
    import panel as pn

    page = AdaptivePage(attributes=["sex", "race"])
    view = page.__panel__()
    assert isinstance(view, pn.viewable.Viewable)
    assert page.__panel__() is view
    assert isinstance(page.results_frame(), pd.DataFrame)


def test_note_and_empty_state_before_a_run():
    import panel as pn

    from explorer.pages.adaptive import EMPTY_STATE

    page = AdaptivePage(attributes=["age", "sex"], max_rounds=3, epsilon=1.0, delta=1e-9,
                        compare_rp=False)
    view = page.__panel__()
    cards = [c for c in view.select(pn.Card) if "learn-note" in c.css_classes]
    assert len(cards) == 1 and cards[0].title == "What am I looking at?"
    empty = [p for p in view.select(pn.pane.Markdown) if p.object == EMPTY_STATE]
    assert len(empty) == 1
    charts = [p for p in view.select(pn.pane.HoloViews)]
    assert len(charts) == 1

    def shown(viewable) -> bool:
        visible = viewable.visible
        return bool(visible() if callable(visible) else visible)

    holder = next(c for c in view.select(pn.Column) if charts[0] in c.objects)
    assert shown(empty[0]) and not shown(holder)
    page.run()
    assert page.results and not shown(empty[0]) and shown(holder)
