"""The census hierarchy page's view-model, without a browser."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import holoviews as hv
import pandas as pd
import panel as pn
import pytest

from engine.mechanisms.hierarchical import synthetic_census
from engine.mechanisms.hierarchical.io import write_hierarchy_csv
from explorer.components.exports import SCENARIO_COLUMNS
from explorer.pages.census import EXAMPLE, RUN_COLUMNS, UPLOAD, CensusPage, count_text

SPEC = "levels=1,2,5;groups=300;max_size=6;seed=1"


@pytest.fixture
def page() -> CensusPage:
    p = CensusPage(synthetic_spec=SPEC, variants=["dp", "relaxed", "gls"], trials=3, seed=2)
    p.run()
    return p


def test_run_fills_results_and_frames(page):
    assert page.error == "" and not page.running and page.progress == 100.0
    assert page.status.endswith("Evaluation against the true data: not a release; the budget "
                                "ledger is not charged.")
    frame = page.results_frame()
    assert list(frame["variant"]) == ["dp", "relaxed", "gls"]
    assert set(frame.columns) >= {"rmse", "rmse_sd", "violations", "seconds", "rmse_level_1",
                                  "rmse_level_3"}
    by = frame.set_index("variant")
    assert by.loc["dp", "violations"] == 0
    assert by.loc["gls", "negative_cells"] >= 0
    assert page.description.startswith(SPEC)
    levels = page.level_frame()
    assert len(levels) == 9 and list(levels["level"][:3]) == ["1 nation", "2 state",
                                                              "3 county"]
    # the level frame carries the engine's numbers unchanged
    ev = page.evaluations["dp"]
    assert levels[levels["variant"] == "dp"]["rmse"].tolist() == pytest.approx(
        ev.rmse_by_level.tolist())


def test_heatmap_and_tree_view(page):
    heat = page.heatmap_frame("dp")
    assert len(heat) == 3 * 7 and set(heat["level"]) == {"1 nation", "2 state", "3 county"}
    assert page.region == "nation"
    assert len(page.param.region.objects) == 1 + 2 + 5
    tree = page.tree_frame("nation", "dp")
    assert set(tree["role"]) == {"selected", "child"}
    selected = tree[tree["role"] == "selected"]
    assert selected["true"].sum() == 300 and selected["released"].sum() == 300
    children = page._children_table("nation", "dp")
    assert children["released groups"].iloc[1:].sum() == 300  # children sum to the parent
    leaf = page.param.region.objects[-1]
    assert "(leaf)" in page.breadcrumb(leaf) and "nation **nation**" in page.breadcrumb(leaf)
    assert set(page.tree_frame(leaf, "dp")["role"]) == {"selected"}


def test_charts_are_holoviews_objects(page):
    assert isinstance(page.error_bars_chart(), hv.Overlay)
    assert isinstance(page.heatmap_chart("relaxed"), hv.HeatMap)
    assert isinstance(page.tree_chart("nation", "dp"), hv.Bars)
    empty = CensusPage()
    assert isinstance(empty.error_bars_chart(), hv.Curve)
    assert empty.tree_frame().empty and empty.heatmap_frame().empty


def test_panel_view_builds(page):
    view = page.__panel__()
    assert isinstance(view, pn.Row)
    assert page.__panel__() is view
    texts = "\n".join(str(m.object) for m in view.select(pn.pane.Markdown))
    assert "Privacy unit: one individual" in texts
    assert view.select(pn.pane.HoloViews)


def test_number_boxes_not_spinners_set_the_page_and_say_what_is_wrong():
    """Issue 29 item 9: no spinner (its up/down buttons have no name a screen reader reads);
    a labelled number box per number, kept in step with the page."""
    page = CensusPage()
    view = page.__panel__()
    assert view.select(pn.widgets.IntInput) == [] and view.select(pn.widgets.FloatInput) == []

    def box(css: str) -> tuple[pn.widgets.TextInput, pn.pane.Markdown]:
        [text] = [t for t in view.select(pn.widgets.TextInput) if css in t.css_classes]
        [message] = [m for m in view.select(pn.pane.Markdown) if f"{css}-problem" in m.css_classes]
        return text, message

    (epsilon, problem), (trials, _) = box("census-epsilon"), box("census-trials")
    (seed, _), (top, _) = box("census-seed"), box("census-max-size")
    assert [epsilon.name, trials.name, seed.name, top.name] == [
        "epsilon", "Trials", "Seed (teaching only)", "Max size (public top bucket)"]
    assert (epsilon.value, trials.value, seed.value, top.value) == ("1", "5", "", "")
    epsilon.value, trials.value, seed.value, top.value = "0.5", "12", "3", "6"
    assert (page.epsilon, page.trials, page.seed, page.max_size) == (0.5, 12, 3, 6)
    trials.value = "2.5"
    assert page.trials == 12 and trials.value == "2.5"
    assert [m.object for m in view.select(pn.pane.Markdown)
            if "census-trials-problem" in m.css_classes] == [
        "Trials: must be a whole number (got 2.5); still using 12."]
    epsilon.value = "-1"
    assert page.epsilon == 0.5
    assert problem.object == "epsilon: must be between 0.0001 and 100 (got -1); still using 0.5."
    page.seed = None  # set elsewhere: the box shows it
    assert seed.value == ""


def test_errors_are_shown_not_raised():
    bad = CensusPage(synthetic_spec="levels=2,3", variants=["dp"], trials=1)
    bad.run()
    assert bad.error.startswith("synthetic.levels") and "\n" not in bad.error
    assert bad.results == [] and not bad.running
    none = CensusPage(source=UPLOAD, variants=["dp"], trials=1)
    none.run()
    assert "choose a hierarchy CSV" in none.error
    weights = CensusPage(synthetic_spec=SPEC, split="user", level_weights="1,x",
                         variants=["dp"], trials=1)
    weights.run()
    assert weights.error.startswith("level weights")


def test_upload_example_split_and_worker_thread(tmp_path):
    path = tmp_path / "h.csv"
    write_hierarchy_csv(synthetic_census(SPEC), path)
    no_range = CensusPage(source=UPLOAD, csv_file=path.read_bytes(), variants=["dp"], trials=1)
    no_range.run()  # the size range is public: never taken from the uploaded (private) CSV
    assert no_range.error.startswith("max size: required for an uploaded hierarchy")
    page = CensusPage(source=UPLOAD, csv_file=path.read_bytes(), variants=["cdp", "topdown"],
                      split="user", level_weights="1,1,2", trials=2, max_size=6)
    page.start()
    page.wait(120)
    assert page.error == "" and [r["variant"] for r in page.results] == ["cdp", "topdown"]
    assert page.evaluations["cdp"].report["epsilon_by_level"] == pytest.approx(
        [0.25, 0.25, 0.5])
    assert page.heat_variant == "cdp"
    example = CensusPage(source=EXAMPLE, variants=["chain"], trials=2)
    example.run()
    assert example.results[0]["violations"] == 0 and example.region == "US"


def test_cancel_keeps_finished_variants():
    page = CensusPage(synthetic_spec=SPEC, variants=["dp", "gls"], trials=2)
    page._prepare()
    page._progress.cancel()
    page._job()
    assert page.status.startswith("Cancelled") and not page.running


def test_pages_draw_from_os_entropy_unless_seeded():
    from engine.noise import SEEDED_LABEL
    from explorer.pages.adaptive import AdaptivePage

    assert CensusPage().seed is None and AdaptivePage().seed is None
    small = {"attributes": ["sex", "race"], "max_rounds": 2, "compare_rp": False}
    seeded, unseeded = AdaptivePage(seed=3, **small), AdaptivePage(**small)
    seeded.run()
    unseeded.run()
    # The export is one plain table: the seeded label is a column on every row.
    assert set(seeded.export_frame()["release"]) == {SEEDED_LABEL}
    # the bundled Adult data is the teaching sandbox: never charged, and labelled so
    assert set(unseeded.export_frame()["release"]) == {"teaching: not a private release"}


def test_counts_print_as_whole_numbers_and_the_note_explains_variants(page):
    from explorer.pages.census import NOTE, whole_numbers

    children = whole_numbers(page._children_table("nation", "dp"))
    assert children["true groups"].dtype.kind == "i" and children["true groups"].iloc[0] == 300
    assert "300.0" not in children.to_string() and " 300" in children.to_string()
    gls = whole_numbers(page.tree_frame("nation", "gls"))
    assert gls["true"].dtype.kind == "i"  # true counts are whole; GLS releases may be reals
    results = whole_numbers(page.results_frame()).set_index("variant")
    assert results["violations"].dtype.kind == "i" and results.loc["dp", "violations"] == 0
    assert "**relaxed**: M_H^R (relaxed QP + rounding)" in NOTE and "**violations**" in NOTE


def test_empty_state_before_a_run_and_csv_after():
    from explorer.pages.census import EMPTY_STATE

    fresh = CensusPage(synthetic_spec=SPEC, variants=["dp"], trials=1, seed=2)
    fresh.__panel__()
    empty = [p for p in fresh._view.select(pn.pane.Markdown) if p.object == EMPTY_STATE]
    assert len(empty) == 1 and empty[0].visible
    downloads = [d for d in fresh._view.select(pn.widgets.FileDownload)
                 if "census-csv" in d.css_classes]
    assert len(downloads) == 1 and not downloads[0].visible
    fresh.run()
    assert not empty[0].visible and downloads[0].visible
    csv = pd.read_csv(downloads[0].callback())
    assert list(csv["variant"]) == ["dp"] and csv["violations"].tolist() == [0]


def census_csv(page: CensusPage) -> str:
    """What the page's *Download table (CSV)* button saves."""
    view = page.__panel__()
    [download] = [d for d in view.select(pn.widgets.FileDownload)
                  if "census-csv" in d.css_classes]
    assert download.filename == "census.csv"
    return download.callback().getvalue()


def test_census_csv_has_the_privacy_level_noise_and_hierarchy_as_columns(page):
    text = census_csv(page)
    assert not any(line.startswith("#") for line in text.splitlines())
    table = pd.read_csv(io.StringIO(text))
    assert list(table.columns[-len(SCENARIO_COLUMNS) - len(RUN_COLUMNS):]) == [
        *SCENARIO_COLUMNS, *RUN_COLUMNS]
    assert list(table["variant"]) == ["dp", "relaxed", "gls"]
    assert set(table["privacy"]) == {"pure eps-DP eps=1"}
    assert set(table["noise"]) == {"geometric"} and set(table["epsilon"]) == {1.0}
    assert table["delta"].isna().all() and table["rho"].isna().all()  # pure eps-DP
    assert set(table["workload"]) == {f"{SPEC}: 3 levels: 1 nation, 2 state, 5 county; "
                                      "7 size buckets; n = 300 groups"}
    # one count per (size, region): 7 sizes x 8 regions; the data: 7 sizes x 5 counties
    assert set(table["queries"]) == {56} and set(table["cells"]) == {35}
    assert set(table["privacy_unit"]) == {"individual"} and set(table["split"]) == {"uniform"}
    assert set(table["trials"]) == {3}


def test_census_csv_prints_counts_whole_and_describes_the_run(page):
    page.param.update(epsilon=0.25, noise="laplace", split="user", level_weights="1,1,2")
    table = pd.read_csv(io.StringIO(census_csv(page)), dtype=str).set_index("variant")
    # the run's settings, not the widgets changed since
    assert set(table["epsilon"]) == {"1.0"} and set(table["noise"]) == {"geometric"}
    assert set(table["split"]) == {"uniform"}
    for column in ("queries", "cells", "trials", "violations"):
        assert all(re.fullmatch(r"\d+", v) for v in table[column]), table[column]
    assert table.loc["dp", "violations"] == "0" and table.loc["gls", "violations"] == "0"
    fresh = CensusPage()
    with pytest.raises(ValueError, match="nothing to export before a run"):
        fresh.export_frame()


def test_tree_view_table_prints_group_counts_as_a_person_reads_them(page):
    assert count_text(20000.0) == "20,000" and count_text(20000.000000001) == "20,000"
    assert count_text(4225.684783) == "4,225.7" and count_text(3.0) == "3"
    page.heat_variant = "gls"  # GLS releases fractions: 169.764706... groups
    view = page.__panel__()
    [pane] = [d for d in view.select(pn.pane.DataFrame) if "census-children" in d.css_classes]
    html = pane.object.to_html(index=False, formatters=pane.formatters)
    cells = re.findall(r"<td>([^<]*)</td>", html)
    assert cells[:3] == ["nation", "selected", "300"]
    assert not [c for c in cells if re.fullmatch(r"[\d,]+\.\d{2,}", c)]
    released = page._children_table("nation", "gls")["released groups"]
    assert f"<td>{released.iloc[1]:,.1f}</td>" in html


def test_release_is_charged_recorded_downloadable_and_refused_with_what_remains(tmp_path):
    from engine.ledger import Budget, Ledger, fingerprint_bytes

    hierarchy = synthetic_census(SPEC)
    path = tmp_path / "h.csv"
    write_hierarchy_csv(hierarchy, path)
    content = path.read_bytes()
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    with Ledger(url) as ledger:
        ledger.register("towns", fingerprint_bytes(content), Budget("epsilon", 1.5))
    page = CensusPage(source=UPLOAD, csv_file=content, max_size=6, epsilon=1.0,
                      release_variant="dp", ledger_url=url)
    page.update_quote()
    assert page.quote_line == ("This release costs eps=1, charged to towns (eps=1.5 in all); "
                               "remaining after it: 0.5 (rho 0.125 = eps 0.5 at delta 1e-06).")
    page.make_release()
    assert page.error == "", page.error
    assert page.release_status == ("Released dp at eps = 1 (0 consistency violations); charged "
                                   "eps=1 to towns: spent 1 of eps=1.5.")
    archive = zipfile.ZipFile(io.BytesIO(page.released_zip()))
    assert sorted(archive.namelist()) == ["county.csv", "nation.csv", "release.json",
                                          "state.csv"]
    nation, state, county = (pd.read_csv(io.BytesIO(archive.read(name)), comment="#",
                                         dtype={"size": str})
                             for name in ("nation.csv", "state.csv", "county.csv"))
    assert list(county.columns) == ["nation", "state", "county", "size", "estimate",
                                    "margin_95", "raw"]
    assert [len(t) for t in (nation, state, county)] == [7, 2 * 7, 5 * 7]  # sizes 0..5, 6+
    for table in (nation, state, county):  # whole, non-negative, each level sums to n
        assert table["estimate"].dtype == "int64" and (table["estimate"] >= 0).all()
        assert table["estimate"].sum() == 300 and (table["margin_95"] > 0).all()
    assert (county.groupby(["state", "size"], sort=False)["estimate"].sum().tolist()
            == state["estimate"].tolist())  # parent = sum of children, exactly
    assert "'estimate' column is consistent" in page.release_method
    record = page.released.record
    assert record["budget"]["spent"] == 1.0 and record["budget"]["remaining"] == 0.5
    assert record["privacy_unit"] == "one individual joining or leaving a group"
    with Ledger(url) as ledger:
        (entry,) = ledger.history("towns")
    assert (Path(entry.record_path) / "county.csv").exists()
    page.make_release()
    assert page.release_status == "Refused: nothing was released."
    assert page.error.endswith("nothing was released; remaining: eps = 0.5")
    synthetic = CensusPage(synthetic_spec=SPEC, release_variant="relaxed", ledger_url=url)
    synthetic.make_release()
    assert synthetic.release_status.endswith(
        "not charged: synthetic data: nothing private is released; the budget ledger is not "
        "charged.")
