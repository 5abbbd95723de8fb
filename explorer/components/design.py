"""The site's look: Panel's Bootstrap design with text colours every reader can read.

Panel's default colours put some text below the 4.5:1 contrast WCAG asks of body text: a
warning alert's #997404 on #fff3cd (3.9:1) and inline ``code`` in #82aaff on white (2.3:1).
:class:`ReadableBootstrap` adds one stylesheet to every component (inside its shadow root, where
a page-level stylesheet does not reach) that darkens them; everything else is Bootstrap's.
"""

from __future__ import annotations

from panel.theme import Bootstrap
from panel.theme.base import Inherit
from panel.viewable import Viewable

#: Alert text colours with at least 4.5:1 contrast on their alert's background (Bootstrap 5.3's).
ALERT_TEXT = {"warning": "#664d03", "danger": "#842029", "info": "#055160", "success": "#0f5132"}

#: Text colours with at least 4.5:1 contrast on their background (the alerts'; inline code in a
#: dark blue, code blocks keep their dark theme).
READABLE_CSS = (":host {\n"
                + "".join(f"  --{kind}-text-color: {color};\n"
                          for kind, color in ALERT_TEXT.items())
                + "}\n:not(pre) > code {\n  color: #1c3f94;\n}\n")

#: The alert colours for an alert placed straight into the page template, outside every
#: component (the sidebar's store warning, a page that could not be built): Bootstrap's page
#: stylesheet colours those, and a component's stylesheet does not reach it.
PAGE_ALERT_CSS = "".join(f".alert-{kind} {{ --bs-alert-color: {color}; }}\n"
                         for kind, color in ALERT_TEXT.items())


class ReadableBootstrap(Bootstrap):
    """Bootstrap, with :data:`READABLE_CSS` in every component."""

    modifiers = {
        **Bootstrap.modifiers,
        Viewable: {"stylesheets": [Inherit, READABLE_CSS]},
    }
