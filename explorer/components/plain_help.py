"""Widgets whose help (the "?" beside the label) is plain text, shown by the browser.

Panel turns a widget's ``description`` (for ``from_param``, the parameter's ``doc``) into a
Bokeh ``Tooltip`` holding an ``HTML`` model rendered from Markdown: two Bokeh models and a
Markdown pass per widget on every page open, and a page's web-process CPU goes mostly into its
models (issue 30 item 3). Bokeh also takes the description as plain text, which it puts on the
"?" icon as its ``title``: the same words on hover, no model. The widgets here are Panel's own
with that one difference; use them where the help is a plain sentence (no Markdown).

Example:
    >>> import param
    >>> class Form(param.Parameterized):
    ...     name = param.String(default="", doc="Name of the data set.")
    >>> box = TextInput.from_param(Form().param.name)
    >>> box._process_param_change({"description": box.description})["description"]
    'Name of the data set.'
"""

from __future__ import annotations

from typing import Any

import panel as pn


class PlainHelp:
    """Mixin for a Panel widget: a text ``description`` goes to Bokeh as plain text."""

    def _process_param_change(self, params: dict[str, Any]) -> dict[str, Any]:
        text = params.pop("description") if isinstance(params.get("description"), str) else None
        params = super()._process_param_change(params)  # type: ignore[misc]
        if text is not None:
            params["description"] = text
        return params


class TextInput(PlainHelp, pn.widgets.TextInput):
    """:class:`panel.widgets.TextInput` with plain-text help."""


class Select(PlainHelp, pn.widgets.Select):
    """:class:`panel.widgets.Select` with plain-text help."""
