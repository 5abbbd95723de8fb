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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from panel.template import BootstrapTemplate

from explorer.components.design import PAGE_ALERT_CSS

#: The page markup (Panel's Bootstrap template with a valid sidebar).
TEMPLATE_FILE = Path(__file__).with_name("site_template.html")

#: The sidebar's opening and closing tags in Panel's template and in ours, in that order.
SIDEBAR_TAGS = (('<ul class="nav flex-column">', '<div class="nav flex-column">'),
                ("</ul>", "</div>"))


class SiteTemplate(BootstrapTemplate):
    """:class:`~panel.template.BootstrapTemplate` whose sidebar holds its items in a ``<div>``."""

    _template = TEMPLATE_FILE

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.config.raw_css.append(PAGE_ALERT_CSS)
