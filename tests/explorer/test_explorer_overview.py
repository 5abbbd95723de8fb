"""The overview page and the served entry point, without a browser."""

from __future__ import annotations

import sys
import types

import pandas as pd
import panel as pn
import pytest

from explorer import app
from explorer.pages import overview
from explorer.pages.overview import OverviewPage, as_frame


def _texts(viewable) -> str:
    return "\n".join(
        str(pane.object)
        for pane in viewable.select(pn.pane.Markdown) + viewable.select(pn.pane.Alert)
    )


def test_as_frame_accepts_frame_rows_and_compare_json():
    frame = pd.DataFrame({"mechanism": ["identity"], "rmse": [1.0]})
    assert as_frame(frame) is frame
    assert list(as_frame([{"mechanism": "hdmm", "rmse": 2.0}])["mechanism"]) == ["hdmm"]
    document = {"queries": 64, "results": [{"mechanism": "wavelet", "rmse": None}]}
    assert list(as_frame(document)["mechanism"]) == ["wavelet"]
    with pytest.raises(TypeError, match="int"):
        as_frame(3)


def test_overview_lists_mechanisms_and_shows_the_comparison(monkeypatch):
    table = pd.DataFrame({"mechanism": ["identity", "hdmm"], "rmse": [3.0, 2.0]})
    monkeypatch.setattr(overview, "mechanism_names", lambda: ["identity", "hdmm"])
    monkeypatch.setattr(overview, "sample_comparison", lambda spec: table)

    view = OverviewPage().__panel__()

    text = _texts(view)
    assert "# Differential privacy workbench" in text
    assert "- `identity`\n- `hdmm`" in text
    (frame_pane,) = view.select(pn.pane.DataFrame)
    assert frame_pane.object is table


def test_overview_shows_engine_failures_instead_of_raising(monkeypatch):
    def missing():
        raise ImportError("cannot import name 'registry_names'")

    def broken(spec):
        raise RuntimeError("solver exploded")

    monkeypatch.setattr(overview, "mechanism_names", missing)
    monkeypatch.setattr(overview, "sample_comparison", broken)

    text = _texts(OverviewPage().__panel__())

    assert "Engine not ready: ImportError: cannot import name 'registry_names'" in text
    assert "Error: RuntimeError: solver exploded" in text


def test_engine_is_imported_lazily_and_given_a_copy_of_the_spec(monkeypatch):
    seen = []

    def compare_scenario(spec):
        seen.append(spec)
        spec["workload"].clear()  # a careless engine must not corrupt the page's sample
        return {"queries": 64, "results": [{"mechanism": "identity", "rmse": 4.2}]}

    monkeypatch.setitem(
        sys.modules, "engine.compare", types.SimpleNamespace(compare_scenario=compare_scenario)
    )
    monkeypatch.setitem(
        sys.modules,
        "engine.mechanisms",
        types.SimpleNamespace(registry_names=lambda: ("identity",)),
    )

    assert overview.mechanism_names() == ["identity"]
    frame = overview.sample_comparison(overview.SAMPLE_SPEC)

    assert list(frame["rmse"]) == [4.2]
    assert seen[0] is not overview.SAMPLE_SPEC
    assert overview.SAMPLE_SPEC["workload"] == [{"product": {"x": "prefix"}}]


def test_served_entry_wraps_the_page_in_a_template():
    template = app.overview_app()
    assert isinstance(template, pn.template.BaseTemplate)
    assert set(app.pages()) == {"/"}


@pytest.mark.parametrize("argv", [["--port", "0"], ["--port", "70000"], ["--port", "x"]])
def test_main_rejects_bad_ports(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        app.main(argv)
    assert exit_info.value.code == 2
    assert "--port" in capsys.readouterr().err
