"""The collapsible "what am I looking at" note every page carries, in plain words."""

from __future__ import annotations

import panel as pn

NOTE_TITLE = "What am I looking at?"


def learn_note(text: str, title: str = NOTE_TITLE, collapsed: bool = True) -> pn.Card:
    """A collapsed card holding a short plain-language explanation (Markdown)."""
    return pn.Card(
        pn.pane.Markdown(text, sizing_mode="stretch_width"),
        title=title,
        collapsed=collapsed,
        css_classes=["learn-note"],
        sizing_mode="stretch_width",
    )


def caption(text: str) -> pn.pane.Markdown:
    """A short caption under a chart."""
    return pn.pane.Markdown(text, css_classes=["chart-caption"], sizing_mode="stretch_width",
                            styles={"color": "#444", "font-size": "0.92em"})
