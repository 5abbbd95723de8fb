"""Bokeh's property bookkeeping without work whose result it throws away (serving processes).

Three of Bokeh 3.9's routines do work per call that a served page pays for on every open:

* **Serialising a model** (``HasProps.query_properties_with_values`` with
  ``include_defaults=False``, how Bokeh turns every model of a document into JSON for the
  browser's ``PULL-DOC`` and every model added later into a patch) takes the value of *every*
  property of the model, which for a property never set means making its default afresh
  (copied, themed, validated), and only then leaves out the properties that were never set
  (Bokeh's own comment there says it would check first if it had a reliable way). A page's
  model has 40-130 properties and sets a handful, so that was 2,100 defaults made and thrown
  away on the trade-off page's 101 models, 13-15 % of its build (``benchmarks/page_cpu.py
  --in-process``). :func:`serialised_values` takes the values of the properties the model set
  (or themed, or whose default Bokeh made unique to it), in Bokeh's order, as Bokeh's code
  would; a property that must be set and was not still raises Bokeh's ``UnsetValueError`` (or
  is returned as ``Undefined`` when asked for), as before. Every page's document serialises
  to the same JSON either way (tests/explorer/server/test_server_model_values.py).
* **A property's default** looks up the model class's overridden defaults
  (``HasProps._overridden_defaults``) by merging the dictionaries of every class in its MRO on
  each call, 60-100 merges per model; they are fixed when the class is made, so
  :func:`overridden_defaults` merges them once per class. Likewise whether a property's
  default must be made anew for each model (a container, or made by a function), which Bokeh
  asks for every property of every model it makes
  (``PropertyDescriptor.has_unstable_default``): it depends on the property and the model's
  class only, so :func:`has_unstable_default` works it out once per pair.

:func:`install` puts them in place for the process (``explorer.server.process.prepare``). All
depend on Bokeh's internals, which is why the test compares the whole documents' JSON with
and without them on every page: a Bokeh release that changes what these routines do fails it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from bokeh.core.has_props import HasProps
from bokeh.core.property.descriptors import PropertyDescriptor
from bokeh.core.property.singletons import Undefined
from bokeh.core.property.wrappers import PropertyValueContainer

#: Bokeh's own routines, as imported (what :func:`install` replaces).
BOKEH_QUERY = HasProps.__dict__["query_properties_with_values"]
BOKEH_OVERRIDDEN_DEFAULTS = HasProps.__dict__["_overridden_defaults"]  # a classmethod
BOKEH_HAS_UNSTABLE_DEFAULT = PropertyDescriptor.__dict__["has_unstable_default"]
#: :func:`has_unstable_default`'s answers by (property descriptor, model class).
UNSTABLE_DEFAULTS: dict[tuple[PropertyDescriptor[Any], type[HasProps]], bool] = {}


@functools.cache
def required_properties(cls: type[HasProps]) -> frozenset[str]:
    """The properties of ``cls`` without a default (Bokeh's ``Required``, unless the class
    overrides it): reading one that was not set raises ``UnsetValueError``."""
    overrides = overridden_defaults(cls)
    return frozenset(name for name, prop in cls.properties(_with_props=True).items()
                     if overrides.get(name, prop.default) is Undefined)


def serialised_values(model: HasProps, query: Callable[[PropertyDescriptor[Any]], bool], *,
                      include_defaults: bool = True,
                      include_undefined: bool = False) -> dict[str, Any]:
    """``HasProps.query_properties_with_values`` (same arguments, same result) that, without
    defaults, reads only the properties it returns (module docstring)."""
    if include_defaults:
        return BOKEH_QUERY(model, query, include_defaults=True,
                           include_undefined=include_undefined)
    themed = model.themed_values() or {}
    unstable = model._unstable_default_values
    chosen = model._property_values.keys() | unstable.keys() | themed.keys()
    required = required_properties(type(model))
    result: dict[str, Any] = {}
    for key in model.properties(_with_props=True):
        if key not in chosen and key not in required:
            continue  # its default: Bokeh would make it, then leave it out
        descriptor = model.lookup(key)
        if not query(descriptor):
            continue
        if key not in chosen:  # required and not set: Bokeh's error, or Undefined if asked
            if not include_undefined:
                descriptor.get_value(model)  # raises UnsetValueError
            result[key] = Undefined
            continue
        value = descriptor.get_value(model)
        if (key not in themed and isinstance(value, PropertyValueContainer)
                and key in unstable):
            continue  # a container default Bokeh made for this model and nobody changed
        result[key] = value
    return result


@functools.cache
def overridden_defaults(cls: type[HasProps]) -> dict[str, Any]:
    """``HasProps._overridden_defaults``, merged once per class (module docstring). The
    dictionary is shared: Bokeh only reads it."""
    return BOKEH_OVERRIDDEN_DEFAULTS.__func__(cls)


def has_unstable_default(descriptor: PropertyDescriptor[Any], model: HasProps) -> bool:
    """``PropertyDescriptor.has_unstable_default``, worked out once per property and model
    class (module docstring)."""
    key = (descriptor, type(model))
    answer = UNSTABLE_DEFAULTS.get(key)
    if answer is None:
        answer = UNSTABLE_DEFAULTS[key] = BOKEH_HAS_UNSTABLE_DEFAULT(descriptor, model)
    return answer


def install() -> None:
    """Serialise models with :func:`serialised_values`, look up overridden defaults with
    :func:`overridden_defaults` and unstable defaults with :func:`has_unstable_default`, in
    this process from now on."""
    HasProps.query_properties_with_values = serialised_values
    HasProps._overridden_defaults = classmethod(overridden_defaults)
    PropertyDescriptor.has_unstable_default = has_unstable_default


def uninstall() -> None:
    """Bokeh's own routines again (tests)."""
    HasProps.query_properties_with_values = BOKEH_QUERY
    HasProps._overridden_defaults = BOKEH_OVERRIDDEN_DEFAULTS
    PropertyDescriptor.has_unstable_default = BOKEH_HAS_UNSTABLE_DEFAULT
