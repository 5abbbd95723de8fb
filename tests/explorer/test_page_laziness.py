"""Pages build what is hidden only when it is shown (issue 30: a page's web-process CPU)."""

from __future__ import annotations

import panel as pn

from explorer.pages.base import lazy_card
from explorer.pages.census import CensusPage
from explorer.pages.compare import ComparePage
from explorer.planning.store import PlanStore
from explorer.session import Session

PREFIX = {"domain": {"x": {"size": 16, "kind": "numeric"}},
          "workload": [{"product": {"x": "prefix"}}],
          "privacy": {"noise": "laplace", "epsilon": 1.0},
          "mechanisms": ["identity", "h2"]}


def test_a_lazy_card_builds_its_content_once_on_the_first_expand():
    built: list[int] = []

    def build() -> pn.pane.Markdown:
        built.append(1)
        return pn.pane.Markdown("inside")

    card = lazy_card(build, title="More")
    assert card.collapsed and card.objects == [] and built == []
    card.collapsed = False
    assert built == [1] and card.objects[0].object == "inside"
    card.collapsed = True
    card.collapsed = False
    assert built == [1] and len(card.objects) == 1


def test_the_compare_pages_python_snippet_is_made_when_its_card_opens():
    view = ComparePage(session=Session(PREFIX, store=PlanStore())).__panel__()
    card = next(c for c in view.select(pn.Card)
                if c.title == "Python that reproduces this comparison")
    assert card.objects == []
    card.collapsed = False
    code = next(p for p in card.select(pn.pane.Markdown) if "python-snippet" in p.css_classes)
    assert code.object.startswith("```python\n") and "h2" in code.object


def test_census_charts_are_drawn_only_once_there_are_results():
    page = CensusPage(synthetic_spec="levels=1,2;groups=50;max_size=4;seed=1",
                      variants=["dp"], trials=1, seed=3)
    charts = page.__panel__().select(pn.pane.HoloViews)
    assert len(charts) == 3 and all(chart.object is None for chart in charts)
    page.run()
    assert page.results and all(chart.object is not None for chart in charts)
