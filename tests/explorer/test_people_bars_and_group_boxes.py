"""Issue 29 items 1 and 4, the last places: Compare's bar chart in people at 95 % (RMSE in the
hover), and the workload builder's k / weight / width boxes that say what is wrong."""

from __future__ import annotations

import pytest
from bokeh.models import HoverTool

from explorer.components.charts import PEOPLE_LABEL, LiveBarsChart
from explorer.components.people import row_factor
from explorer.pages.builder import BuilderPage
from explorer.pages.compare import comparison_frame
from explorer.planning.store import PlanStore
from explorer.session import Session

PREFIX = {"domain": {"x": {"size": 16, "kind": "numeric"}},
          "workload": [{"product": {"x": "prefix"}}],
          "mechanisms": ["identity", "h2"]}


def planned(privacy: dict) -> Session:
    session = Session(dict(PREFIX, privacy=privacy), store=PlanStore())
    session.compare_now()
    return session


def bar_heights(chart: LiveBarsChart, column: str) -> dict[str, float]:
    data = chart.source.data
    return dict(zip(data["mechanism"], data[column], strict=True))


def test_gaussian_bars_are_1_96_times_the_rmse_with_the_rmse_in_the_hover():
    session = planned({"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6})
    chart = LiveBarsChart(session.comparison, factor=row_factor)
    rmse = {r.mechanism: r.rmse for r in session.comparison.rows}
    people = bar_heights(chart, "people")
    for name in ("identity", "h2"):
        assert people[name] == pytest.approx(1.959964 * rmse[name], rel=1e-6)
        assert bar_heights(chart, "rmse")[name] == pytest.approx(rmse[name], rel=1e-12)
    assert chart.figure.yaxis[0].axis_label == PEOPLE_LABEL
    assert "+/- people (95 %)" in PEOPLE_LABEL
    tooltips = dict(chart.figure.select_one({"type": HoverTool}).tooltips)
    assert tooltips["+/- people (95 %)"] == "@people{0,0.0}"
    assert tooltips["RMSE"] == "@rmse{0,0.0000}"
    bound = session.comparison.bound_rmse
    assert chart.span.location == pytest.approx(1.959964 * bound, rel=1e-6)


def test_laplace_bars_match_the_tables_people_column():
    # Laplace: a typical count's exact 95 % quantile, not 1.96 x RMSE; bars and table agree
    session = planned({"noise": "laplace", "epsilon": 1.0})
    chart = LiveBarsChart(session.comparison, factor=row_factor)
    table = comparison_frame(session.comparison).set_index("mechanism")["error_95"]
    people = bar_heights(chart, "people")
    assert people == pytest.approx(table.to_dict(), rel=1e-12)
    ratio = people["identity"] / bar_heights(chart, "rmse")["identity"]
    # a sum of Laplace terms: between a Gaussian's 1.96 and one Laplace term's ln(20)/sqrt(2)
    assert 1.96 < ratio < 2.12


@pytest.fixture
def page() -> BuilderPage:
    page = BuilderPage(session=Session(store=PlanStore()))
    page.__panel__()
    return page


@pytest.mark.parametrize(("box", "text", "message"), [
    ("weight", "abc", 'Weight (importance): "abc" is not a number; still using 1.'),
    ("weight", "-5", "Weight (importance): must be more than 0 (got -5); still using 1."),
    ("k", "abc", 'k: all k-way marginals (marginals only): "abc" is not a number; still '
                 "counted as empty."),
    ("k", "-5", "k: all k-way marginals (marginals only): must be at least 1 (got -5); still "
                "counted as empty."),
])
def test_group_boxes_name_the_problem_keep_the_text_and_refuse_the_group(page, box, text,
                                                                         message):
    before = page.session.draft["workload"]
    number = page.group_boxes[box]
    number.input.value = text
    assert number.problem == message and number.input.value == text
    assert page.model.group.weight == 1.0 and page.model.group.k is None
    assert page.add_group() == f"{message} The group was not added."
    assert page.session.draft["workload"] == before


def test_group_boxes_read_thousands_and_empty_k(page):
    weight, k = page.group_boxes["weight"], page.group_boxes["k"]
    weight.input.value = "1,000"
    assert weight.problem == "" and page.model.group.weight == 1000.0
    assert weight.input.value == "1,000"  # kept as typed
    k.input.value = "2"
    assert page.model.group.k == 2
    k.input.value = ""
    assert k.problem == "" and page.model.group.k is None


def test_a_block_width_box_refuses_and_reads(page):
    model = page.model
    model.group.param.update(kind="product", attributes=[next(iter(model.group.param
                                                                   .attributes.objects))])
    choice = model.group.blocks[0]
    choice.block = "range"  # a block with a width
    box = page.group_boxes  # k and weight, plus the width box made when the blocks are shown
    width = page.width_box(choice)
    width.input.value = "-5"
    assert width.problem == (f"Width for {choice.attribute} (range blocks): must be at least 1 "
                             "(got -5); still using 2.")
    assert page.add_group().endswith("The group was not added.") and set(box) == {"k", "weight"}
    width.input.value = "3"
    assert width.problem == "" and choice.width == 3
