"""The collapsible "what am I looking at" note every page carries, in plain words."""

from __future__ import annotations

import panel as pn

from explorer.components.markdown import Markdown

NOTE_TITLE = "What am I looking at?"

#: The folded note's look: a bordered box like Bootstrap's cards, its title in bold.
FOLDED_NOTE_CSS = """
details.note-box {
  border: 1px solid rgba(0, 0, 0, 0.175);
  border-radius: 0.375rem;
  padding: 0 0.75rem;
}
details.note-box > summary {
  cursor: pointer;
  font-weight: 600;
  font-size: 1.15rem;
  padding: 0.5rem 0;
}
"""


def folded_note(text: str) -> pn.pane.Markdown:
    """The folded "What am I looking at?" note (Markdown) as one pane: a ``<details>`` element
    the browser unfolds by itself, so the note costs one Bokeh model on every page open (a
    card cost three and a round trip to unfold) and nothing when read; its text is parsed
    once per process (:class:`~explorer.components.markdown.Markdown`)."""
    return Markdown(
        f'<details class="note-box">\n<summary>{NOTE_TITLE}</summary>\n\n{text.strip()}\n\n'
        "</details>",
        css_classes=["learn-note"], sizing_mode="stretch_width", margin=(5, 10),
        stylesheets=[FOLDED_NOTE_CSS])


def caption(text: str) -> pn.pane.Markdown:
    """A short caption under a chart."""
    return pn.pane.Markdown(text, css_classes=["chart-caption"], sizing_mode="stretch_width",
                            styles={"color": "#444", "font-size": "0.92em"})
