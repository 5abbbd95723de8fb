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

#: Text colours with at least 4.5:1 contrast on their background (Bootstrap 5.3's alert text
#: colours; inline code in a dark blue, code blocks keep their dark theme).
READABLE_CSS = """
:host {
  --warning-text-color: #664d03;
  --danger-text-color: #842029;
  --info-text-color: #055160;
  --success-text-color: #0f5132;
}
:not(pre) > code {
  color: #1c3f94;
}
"""


class ReadableBootstrap(Bootstrap):
    """Bootstrap, with :data:`READABLE_CSS` in every component."""

    modifiers = {
        **Bootstrap.modifiers,
        Viewable: {"stylesheets": [Inherit, READABLE_CSS]},
    }
