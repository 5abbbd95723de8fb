"""Bokeh's serialisation without the defaults it throws away (issue 30 item 3): every page's
document serialises to the same JSON, and a property that must be set still says so."""

from __future__ import annotations

import json

import pytest
from bokeh.core.has_props import HasProps
from bokeh.core.properties import Int, Required, String
from bokeh.core.property.descriptors import PropertyDescriptor, UnsetValueError
from bokeh.core.property.singletons import Undefined
from bokeh.document import Document
from bokeh.model import Model
from bokeh.models import ColumnDataSource, LinearAxis, Range1d
from panel.io.state import set_curdoc

from explorer import app
from explorer.pages.base import PAGES
from explorer.server import model_values


@pytest.fixture
def installed():
    model_values.install()
    yield
    model_values.uninstall()


class Labelled(Model):
    """A model with a property that must be set and one with a default."""

    label = Required(String)
    size = Int(default=3)


def page_document(path: str) -> Document:
    doc = Document()
    with set_curdoc(doc):
        app.page_app(path).server_doc(doc)
    return doc


def test_every_page_serialises_as_with_bokehs_own_routines(installed):
    for path, _, _ in PAGES:
        doc = page_document(path)  # built with the faster routines in place
        ours = json.dumps(doc.to_json(deferred=False))
        model_values.uninstall()
        bokehs = json.dumps(doc.to_json(deferred=False))
        model_values.install()
        assert ours == bokehs, path
        assert len(doc.models) >= 20, path
        if path == "/tradeoff":  # the chart's curves: arrays sent as binary
            assert '"type":"ndarray"' in ours.replace(" ", "")


def test_serialising_makes_no_default_it_leaves_out(monkeypatch):
    axis = LinearAxis(axis_label="people")
    bokehs = axis.properties_with_values(include_defaults=False)  # as a document has it
    made = []
    original = PropertyDescriptor.instance_default

    def counting(self, obj):
        made.append(self.name)
        return original(self, obj)

    monkeypatch.setattr(PropertyDescriptor, "instance_default", counting)
    assert axis.properties_with_values(include_defaults=False) == bokehs
    assert len(made) >= 40  # Bokeh's own: every default that is not a container, again
    made.clear()
    model_values.install()
    try:
        assert axis.properties_with_values(include_defaults=False) == bokehs
    finally:
        model_values.uninstall()
    assert made == []
    assert "axis_label" in bokehs and "axis_line_color" not in bokehs


def test_a_required_property_left_unset_still_raises_or_is_undefined(installed):
    model = Labelled()
    with pytest.raises(UnsetValueError):
        model.properties_with_values(include_defaults=False)
    values = model.properties_with_values(include_defaults=False, include_undefined=True)
    assert values["label"] is Undefined and "size" not in values
    model.label = "people"
    assert model.properties_with_values(include_defaults=False)["label"] == "people"
    assert model_values.required_properties(Labelled) == {"label"}


def test_overridden_defaults_are_merged_once_per_class_and_match_bokehs(installed):
    assert Range1d._overridden_defaults() is Range1d._overridden_defaults()
    for cls in (Range1d, ColumnDataSource, Labelled):
        assert cls._overridden_defaults() == model_values.BOKEH_OVERRIDDEN_DEFAULTS.__func__(cls)


def test_unstable_defaults_are_worked_out_once_per_class_and_match_bokehs(installed):
    for model in (Range1d(), ColumnDataSource(), LinearAxis(), Labelled(label="x")):
        for name in model.properties():
            descriptor = model.lookup(name)
            ours = descriptor.has_unstable_default(model)
            assert ours is model_values.BOKEH_HAS_UNSTABLE_DEFAULT(descriptor, model), name
            assert model_values.UNSTABLE_DEFAULTS[(descriptor, type(model))] is ours
    assert ColumnDataSource.lookup("data").has_unstable_default(ColumnDataSource())
    assert not Range1d.lookup("start").has_unstable_default(Range1d())


def test_uninstall_puts_bokehs_routines_back():
    model_values.install()
    model_values.uninstall()
    assert HasProps.__dict__["query_properties_with_values"] is model_values.BOKEH_QUERY
    assert HasProps.__dict__["_overridden_defaults"] is model_values.BOKEH_OVERRIDDEN_DEFAULTS
    assert (PropertyDescriptor.__dict__["has_unstable_default"]
            is model_values.BOKEH_HAS_UNSTABLE_DEFAULT)
