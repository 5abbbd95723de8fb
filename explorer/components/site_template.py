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
three components) is made only when a notebook asks for it, never on a served page; the
template's actions (a component whose only use is to open and close the template's modal
dialog, which no page of the explorer has) are left out of the page (:data:`STATE_ROOTS`: a
Bokeh model and about 3 ms of every page's build); and the template's design is put into
force once per page, not once per template root (:class:`DesignHeld`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import panel.template.base as template_base
from panel.config import config
from panel.io.state import set_curdoc
from panel.layout import Column
from panel.template import BootstrapTemplate

from explorer.components.design import PAGE_ALERT_CSS

#: The page markup (Panel's Bootstrap template with a valid sidebar).
TEMPLATE_FILE = Path(__file__).with_name("site_template.html")

#: The sidebar's opening and closing tags in Panel's template and in ours, in that order.
SIDEBAR_TAGS = (('<ul class="nav flex-column">', '<div class="nav flex-column">'),
                ("</ul>", "</div>"))
#: The block of state roots in Panel's template (base/base.html's: script area, actions,
#: location, notifications, browser information) and in ours (the same without the actions).
STATE_ROOTS = ("{% block state_roots %}\n{{ super() }}\n{% endblock %}",
               "{% block state_roots %}\n{{ embed(roots.js_area) }}\n"
               "{{ embed(roots.location) }}\n{% if notifications %}\n"
               "{{ embed(roots.notifications) }}\n{% endif %}\n{% if browser_info %}\n"
               "{{ embed(roots.browser_info) }}\n{% endif %}\n{% endblock %}")


class SiteTemplate(BootstrapTemplate):
    """:class:`~panel.template.BootstrapTemplate` whose sidebar holds its items in a ``<div>``,
    without the actions of a modal dialog, and whose notebook preview is made on first use."""

    _template = TEMPLATE_FILE

    def __init__(self, **params: Any) -> None:
        self._preview: Column | None = None
        super().__init__(**params)
        self._render_items.pop("actions", None)  # not embedded (STATE_ROOTS): not built
        self.config.raw_css.append(PAGE_ALERT_CSS)

    def _init_doc(self, doc: Any = None, comm: Any = None, title: str | None = None,
                  notebook: bool = False, location: Any = True) -> Any:
        """Panel's set-up of the page's document, with the design set once
        (:func:`design_held`); the document's own design is then set as Panel sets it."""
        with design_held():
            document = super()._init_doc(doc, comm, title, notebook, location)
        with set_curdoc(document):
            config.design = type(self._design)  # as Panel's template leaves it
        return document

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


class DesignHeld:
    """Panel's ``config`` as the template's document set-up sees it (:func:`design_held`).

    Panel's template builds each of its roots (six per page: the main area, the sidebar, the
    notifications, the busy indicator, the actions, the script area) inside
    ``config.set(design=...)``, and each ``config.set`` reads and restores every one of
    Panel's hundred settings: 1.4 ms a root, 6 % of a page's build. Here the first such call
    puts the design into force until the set-up ends; the later ones, for the same design,
    cost nothing. Everything else is Panel's ``config`` itself.

    It stands in for ``config`` by replacing a module global of Panel's template module for
    the length of one set-up (:func:`design_held`), which every thread sees. That is safe only
    because no other template is set up meanwhile: the served pages' documents are set up on
    the event loop's one thread, one at a time (Bokeh awaits nothing inside a set-up, and
    :class:`explorer.server.latency.PageBuildGate` admits one page build at a time), and the
    views built on background threads (:mod:`explorer.components.background`) never set up a
    template. Code that sets up templates on several threads at once must not use it.
    """

    def __init__(self, stack: contextlib.ExitStack) -> None:
        object.__setattr__(self, "_stack", stack)
        object.__setattr__(self, "_design", None)

    def set(self, **settings: Any) -> contextlib.AbstractContextManager:
        """``config.set``, but a design already in force is not set (and restored) again."""
        if list(settings) != ["design"]:
            return config.set(**settings)
        if self._design is None:
            self._stack.enter_context(config.set(**settings))
            object.__setattr__(self, "_design", settings["design"])
        if settings["design"] is self._design:
            return contextlib.nullcontext()
        return config.set(**settings)

    def __getattr__(self, name: str) -> Any:
        return getattr(config, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(config, name, value)


@contextlib.contextmanager
def design_held() -> Iterator[None]:
    """Within the block, Panel's template module sees :class:`DesignHeld` as its ``config``
    (for every thread: safe only while one template is set up at a time; see
    :class:`DesignHeld`)."""
    with contextlib.ExitStack() as stack:
        template_base.config = DesignHeld(stack)
        try:
            yield
        finally:
            template_base.config = config
