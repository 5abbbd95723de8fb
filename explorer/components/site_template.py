"""The site's page template: Panel's Bootstrap template with a sidebar whose markup is valid.

Panel's :class:`~panel.template.BootstrapTemplate` embeds each sidebar item (a rendered
component, a ``<div>``) straight inside a ``<ul>``, which may only hold ``<li>`` elements; a
screen reader announces a list of nothing and axe-core reports it as a serious violation on
every page (issue 29). :class:`SiteTemplate` is that template with the sidebar's ``<ul>`` made a
``<div>``: ``site_template.html`` is a copy of Panel's ``bootstrap/bootstrap.html`` changed in
those two lines only (a test compares the two, so a Panel release that changes its template
fails it instead of going unnoticed). Stylesheets, scripts, the design and every parameter are
the Bootstrap template's own, plus :data:`~explorer.components.design.PAGE_ALERT_CSS` (readable
text in an alert placed straight into the sidebar or the main area).

Every served page builds one template, so its own cost counts on every page (issue 30 item 3):
the notebook preview Panel makes for a template (its description and a "Launch server" button,
three components) is made only when a notebook asks for it, never on a served page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from panel.layout import Column
from panel.template import BootstrapTemplate

from explorer.components.design import PAGE_ALERT_CSS

#: The page markup (Panel's Bootstrap template with a valid sidebar).
TEMPLATE_FILE = Path(__file__).with_name("site_template.html")

#: The sidebar's opening and closing tags in Panel's template and in ours, in that order.
SIDEBAR_TAGS = (('<ul class="nav flex-column">', '<div class="nav flex-column">'),
                ("</ul>", "</div>"))


class SiteTemplate(BootstrapTemplate):
    """:class:`~panel.template.BootstrapTemplate` whose sidebar holds its items in a ``<div>``
    and whose notebook preview is made on first use."""

    _template = TEMPLATE_FILE

    def __init__(self, **params: Any) -> None:
        self._preview: Column | None = None
        super().__init__(**params)
        self.config.raw_css.append(PAGE_ALERT_CSS)

    def _build_layout(self) -> None:  # type: ignore[override]
        # Panel builds the preview here for every template; ``_layout`` builds it when read.
        return None

    @property
    def _layout(self) -> Column:
        """The notebook preview (Panel's own), made the first time it is asked for."""
        if self._preview is None:
            self._preview = super()._build_layout()
        return self._preview

    @_layout.setter
    def _layout(self, value: Column | None) -> None:
        self._preview = value
