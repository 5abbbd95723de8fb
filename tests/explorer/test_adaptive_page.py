"""The Adaptive (data-dependent) page's view-model, without a browser."""

from __future__ import annotations

import io
import json
import math
import re

import pandas as pd
import panel as pn
import pytest

from engine.data import load_adult
from engine.privacy import cdp_rho
from engine.workloads import Workload
from explorer.components.exports import SCENARIO_COLUMNS
from explorer.pages.adaptive import (
    ADULT,
    ROUND_COLUMNS,
    UPLOAD,
    AdaptivePage,
    comparison_table,
    count_text,
    parse_domain,
    rounds_table,
)

SMALL = ["age", "sex", "race", "workclass"]


@pytest.fixture(scope="module")
def seeded() -> AdaptivePage:
    """One seeded run (seeded: never a release, so no budget ledger is touched), shared."""
    page = AdaptivePage(attributes=SMALL, max_rounds=8, epsilon=1.0, delta=1e-9, seed=5)
    page.run()
    assert page.error == "" and page.results and page.rounds
    return page


def by_class(view: pn.viewable.Viewable, kind: type, css: str) -> list:
    return [v for v in view.select(kind) if css in v.css_classes]


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
    csv = page.export_frame().to_csv(index=False)
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
    assert page.error.startswith("domain: upload a public domain file")
    assert "never inferred" in page.error
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
    notes = [p for p in view.select(pn.pane.Markdown) if "learn-note" in p.css_classes]
    assert len(notes) == 1 and "<summary>What am I looking at?</summary>" in notes[0].object
    empty = [p for p in view.select(pn.pane.Markdown) if p.object == EMPTY_STATE]
    assert len(empty) == 1
    charts = [p for p in view.select(pn.pane.HoloViews)]
    assert len(charts) == 1

    def shown(viewable) -> bool:
        visible = viewable.visible
        return bool(visible() if callable(visible) else visible)

    holder = next(c for c in view.select(pn.Column) if charts[0] in c.objects)
    assert shown(empty[0]) and not shown(holder)
    note = notes[0].object
    assert "the L1 error of a marginal is the sum of its counts'" in note
    assert "The **round by round** table under the charts" in note
    page.run()
    assert page.results and not shown(empty[0]) and shown(holder)


def test_counts_read_as_whole_numbers_with_thousands_separators():
    assert count_text(2764.164180) == "2,764"
    assert count_text(27562.27381) == "27,562"
    assert count_text(20.746149) == "20.7"
    assert count_text(math.nan) == ""


def test_tables_on_the_page_print_counts_as_a_person_reads_them(seeded):
    view = seeded.__panel__()
    [results] = by_class(view, pn.pane.DataFrame, "adaptive-results")
    shown = results.object
    raw = seeded.results_frame()
    assert list(shown["method"]) == ["AIM+GReM", "ResidualPlanner (batch)"]
    for column in ("mean L1 (counts)", "max L1 (counts)"):
        assert (raw[column] >= 100).all()
        assert list(shown[column]) == [f"{v:,.0f}" for v in raw[column]]
    assert list(shown["rounds"]) == [str(n) for n in raw["rounds"]]
    # six-decimal counts (``2764.164180``) were the audit's complaint: none are left
    counts = shown[[c for c in shown if c.endswith("(counts)")]].to_numpy().ravel().tolist()
    assert len(counts) == 6 and all(re.fullmatch(r"\d{1,3}(,\d{3})*(\.\d)?", c) for c in counts)
    assert list(shown["mean L1 / N"]) == [f"{v:.3g}" for v in raw["mean L1 / N"]]

    [rounds] = by_class(view, pn.pane.DataFrame, "adaptive-rounds")
    log = rounds.object
    assert list(log.columns) == [title for title, _ in ROUND_COLUMNS.values()]
    first = seeded.rounds[0]
    row = log.iloc[0]
    assert row["Round"] == "1" and row["Marginal measured"] == first["marginal"]
    assert row["Noise sigma (records)"] == count_text(first["sigma"])
    assert first["workload_error"] >= 1000
    assert row["Workload error (records)"] == f"{first['workload_error']:,.0f}"
    assert row["Less noise next round"] in ("yes", "no")
    assert row["Pieces skipped"] == str(first["skipped"])


def test_round_log_columns_are_explained_next_to_the_table(seeded):
    view = seeded.__panel__()
    [log] = by_class(view, pn.pane.DataFrame, "adaptive-rounds")
    holder = next(c for c in view.select(pn.Column) if log in c.objects)
    [help_text] = [o for o in holder.objects if isinstance(o, pn.pane.Markdown)]
    text = help_text.object
    assert text.startswith("### Round by round (last 50 rounds)")
    assert ("* **Noise sigma (records)**: standard deviation of the Gaussian noise added to "
            "each count of the marginal measured this round, in records.") in text
    for title in log.object.columns:
        assert f"* **{title}**: " in text
    assert rounds_table([]).empty and comparison_table([]).empty


def test_csv_is_adaptive_csv_plain_with_integer_columns_and_the_privacy_level(seeded):
    view = seeded.__panel__()
    [download] = by_class(view, pn.widgets.FileDownload, "adaptive-csv")
    assert download.filename == "adaptive.csv"
    text = download.callback().getvalue()
    assert not any(line.startswith("#") for line in text.splitlines())
    table = pd.read_csv(io.StringIO(text), dtype=str)
    rounds = table[table["table"] == "AIM+GReM rounds"]
    comparison = table[table["table"] != "AIM+GReM rounds"]
    assert len(rounds) == len(seeded.rounds) and len(comparison) == 2
    # integers stay integers ("7", not "7.0"), empty on the other part's rows
    assert rounds["round"].tolist() == [str(r["round"]) for r in seeded.rounds]
    assert rounds["skipped"].tolist() == [str(r["skipped"]) for r in seeded.rounds]
    assert comparison["rounds"].tolist() == [str(r["rounds"]) for r in seeded.results]
    assert comparison["round"].isna().all() and rounds["rounds"].isna().all()
    typed = pd.read_csv(io.StringIO(text), dtype_backend="numpy_nullable")
    assert {str(typed[c].dtype) for c in ("round", "rounds", "skipped")} == {"Int64"}
    # the privacy level, noise and workload, as every export's columns
    assert list(typed.columns[-len(SCENARIO_COLUMNS):]) == list(SCENARIO_COLUMNS)
    workload = Workload.marginals(load_adult().project(SMALL).domain, k=2)
    assert set(typed["privacy"]) == {"gaussian eps=1 delta=1e-09"}
    assert set(typed["noise"]) == {"gaussian"}
    assert set(typed["epsilon"]) == {1.0} and set(typed["delta"]) == {1e-9}
    assert set(typed["workload"]) == {workload.describe()}
    assert set(typed["queries"]) == {workload.num_queries}
    assert set(typed["cells"]) == {workload.domain.size}
    assert set(typed["release"]) == {"seeded: reproducible, not a private release"}


def test_csv_describes_the_run_not_the_widgets_changed_since():
    page = AdaptivePage(attributes=["sex", "race"], max_rounds=2, compare_rp=False, seed=1,
                        epsilon=1.0)
    with pytest.raises(ValueError, match="nothing to export before a run"):
        page.export_frame()
    page.run()
    page.param.update(epsilon=3.0, seed=None)
    table = page.export_frame()
    assert set(table["epsilon"]) == {1.0} and set(table["privacy"]) == {
        "gaussian eps=1 delta=1e-09"}
    assert set(table["release"]) == {"seeded: reproducible, not a private release"}


def number_box(view: pn.viewable.Viewable, css: str) -> tuple[pn.widgets.TextInput,
                                                                pn.pane.Markdown]:
    """A number box's text input (class ``css``) and its message (class ``css-problem``)."""
    [box] = by_class(view, pn.widgets.TextInput, css)
    [message] = by_class(view, pn.pane.Markdown, f"{css}-problem")
    return box, message


def test_controls_are_labelled_inputs_a_screen_reader_names():
    """Issue 29 item 9: no multi-choice chips, spinners or unlabelled check boxes (axe-core's
    aria-allowed-attr, button-name and label findings); check boxes and number boxes instead."""
    page = AdaptivePage(attributes=["age", "sex"])
    view = page.__panel__()
    for kind in (pn.widgets.MultiChoice, pn.widgets.IntInput, pn.widgets.FloatInput,
                 pn.widgets.Checkbox):
        assert view.select(kind) == [], kind
    [attributes] = by_class(view, pn.widgets.CheckBoxGroup, "adaptive-attributes")
    assert list(attributes.options) == page.param.attributes.objects
    assert len(attributes.options) == 14 and attributes.value == ["age", "sex"]
    attributes.value = ["age", "sex", "race"]
    assert page.attributes == ["age", "sex", "race"]
    labels = [number_box(view, f"adaptive-{css}")[0].name
              for css in ("epsilon", "delta", "rounds-cap", "seed")]
    assert labels == ["epsilon", "delta (1e-9 as in the AIM paper)", "Rounds cap",
                      "Seed (teaching only)"]
    # an uploaded domain's attributes replace Adult's boxes; ticks not in it are dropped
    [domain] = [f for f in view.select(pn.widgets.FileInput) if f.accept.startswith(".json")]
    domain.value = json.dumps({"sex": 2, "smoker": 2, "years": 5}).encode()
    assert list(attributes.options) == ["sex", "smoker", "years"]
    assert attributes.value == ["sex"] and page.attributes == ["sex"]


def test_number_boxes_set_the_page_and_say_what_is_wrong():
    page = AdaptivePage()
    view = page.__panel__()
    (rounds, _), (seed, seed_problem) = (number_box(view, "adaptive-rounds-cap"),
                                         number_box(view, "adaptive-seed"))
    (epsilon, problem), (delta, _) = (number_box(view, "adaptive-epsilon"),
                                      number_box(view, "adaptive-delta"))
    assert delta.value == "1e-09" and epsilon.value == "1"
    rounds.value = "1,000"
    seed.value = "7"
    delta.value = "1e-6"
    assert (page.max_rounds, page.seed, page.delta) == (1000, 7, 1e-6)
    epsilon.value = "abc"
    assert page.epsilon == 1.0 and epsilon.value == "abc"
    assert problem.object == 'epsilon: "abc" is not a number; still using 1.'
    epsilon.value = "0"
    assert page.epsilon == 1.0
    assert problem.object == "epsilon: must be between 0.001 and 100 (got 0); still using 1."
    seed.value = ""  # empty: OS entropy again
    assert page.seed is None and seed_problem.object == ""
    page.max_rounds = 12  # set elsewhere: the box shows it
    assert rounds.value == "12"


def test_compare_check_boxes_are_labelled_and_kept_in_step():
    page = AdaptivePage()
    view = page.__panel__()
    [rp] = by_class(view, pn.widgets.CheckBoxGroup, "adaptive-compare-rp")
    [pgm] = by_class(view, pn.widgets.CheckBoxGroup, "adaptive-compare-pgm")
    assert rp.options == ["Compare with ResidualPlanner"] and rp.value == rp.options
    assert pgm.options == ["Compare with AIM+PGM"] and pgm.value == []
    assert pgm.disabled is (not page.pgm_available())
    rp.value = []
    assert page.compare_rp is False
    page.compare_rp = True
    assert rp.value == ["Compare with ResidualPlanner"]
    page.compare_pgm = True
    assert pgm.value == ["Compare with AIM+PGM"]
