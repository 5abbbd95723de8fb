"""The YAML spec editor: bound to the session's draft text, with the validator's message.

The editor's value *is* ``session.draft_text`` (``CodeEditor.from_param``): typing applies
the text when the editor loses focus (or on Ctrl+Enter), and visual edits made elsewhere in
the builder rewrite it. An invalid spec leaves the text as typed and shows the validator's
one-line message right under the editor; the last valid scenario stays current.
"""

from __future__ import annotations

import panel as pn
import param

from explorer.components.progress import served
from explorer.session import Session

#: Line numbers dark enough to read (the editor's own grey on white has contrast 1.9:1).
READABLE_GUTTER = ".ace_gutter, .ace_gutter-cell {color: #4d4d4d !important;}"


def error_alert(message: str, css_class: str = "spec-error") -> pn.pane.Alert:
    """The validator's message as a red alert next to its field (hidden when there is none)."""
    return pn.pane.Alert(message or "", alert_type="danger", visible=bool(message),
                         css_classes=[css_class], sizing_mode="stretch_width", margin=(4, 10))


def error_in(layout: pn.layout.ListPanel, index: int, owner: param.Parameterized, name: str,
             css_class: str = "spec-error") -> None:
    """Show the message in string parameter ``name`` of ``owner`` as :func:`error_alert` at
    ``layout[index]``: inserted the first time there is a message (most page opens never show
    one, so no alert is built for them), then kept current and hidden while it is ''.

    Not served: inserted at once. (A served page's watchers on the session are removed when
    its browser tab closes, :func:`explorer.server.sessions.watchers_added`.)
    """
    shown: list[pn.pane.Alert] = []

    def show(*events: param.parameterized.Event) -> None:
        message = getattr(owner, name)
        if shown:
            shown[0].param.update(object=message or "", visible=bool(message))
        elif message or not served():
            shown.append(error_alert(message, css_class))
            layout.insert(index, shown[0])

    owner.param.watch(show, name)
    show()


class SpecEditor(pn.viewable.Viewer):
    """A YAML editor for the whole scenario, kept in step with the visual builder."""

    session = param.ClassSelector(class_=Session, doc="The session whose draft is edited.")
    height = param.Integer(default=420, bounds=(120, None), doc="Editor height in pixels.")

    def __panel__(self) -> pn.viewable.Viewable:
        editor = pn.widgets.CodeEditor.from_param(
            self.session.param.draft_text, language="yaml", on_keyup=False,
            height=self.height, sizing_mode="stretch_width", css_classes=["spec-editor"],
            label="Scenario (YAML)", stylesheets=[READABLE_GUTTER],
        )
        hint = pn.pane.Markdown(
            "Edits apply when you click outside the editor (or press Ctrl+Enter). "
            "Keys are described in the README's *Scenario spec* section.",
            styles={"color": "#555", "font-size": "0.9em"}, margin=(0, 10))
        column = pn.Column(editor, hint, sizing_mode="stretch_width")
        error_in(column, 1, self.session, "draft_error")
        return column
