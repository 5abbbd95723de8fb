"""Panel's Markdown pane, with the HTML of each text made once per server process.

Panel parses a Markdown pane's text into HTML every time the pane is made, and the explorer
makes the same texts on every page open: each page's "What am I looking at?" note (1.2 ms of
parsing for 1,300 characters), headings and explanations. :class:`Markdown` keeps the HTML of
the last :data:`KEPT` texts (with the settings that shape it; none longer than
:data:`LONGEST` characters), so an open page reuses what an
earlier one parsed (issue 30 item 3: a page in under 0.2 s of web-process CPU). Everything
else is Panel's pane.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import panel as pn

#: How many texts' HTML is kept (least recently used first out).
KEPT = 512
#: Longer texts (a workload listed entry by entry) are parsed every time, not kept.
LONGEST = 20_000

_HTML: OrderedDict[tuple, dict[str, Any]] = OrderedDict()
_LOCK = threading.Lock()  # views are also built on the background builders' threads


class Markdown(pn.pane.Markdown):
    """:class:`panel.pane.Markdown` whose text is parsed once per process (then reused)."""

    def _transform_object(self, obj: Any) -> dict[str, Any]:
        if not isinstance(obj, str) or len(obj) > LONGEST:
            return super()._transform_object(obj)
        key = (obj, self.renderer, tuple(self.plugins), self.hard_line_break,
               self.disable_anchors, self.dedent, tuple(self.extensions),
               tuple(sorted(self.renderer_options.items())))
        with _LOCK:
            if key in _HTML:
                _HTML.move_to_end(key)
                return dict(_HTML[key])
        html = super()._transform_object(obj)
        with _LOCK:
            _HTML[key] = dict(html)
            while len(_HTML) > KEPT:
                _HTML.popitem(last=False)
        return html
