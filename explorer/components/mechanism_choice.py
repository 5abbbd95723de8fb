"""The mechanism menu of the per-mechanism views (compare's per-query errors, the strategy
page): only mechanisms with a plan to show, best first, kept in step with the session's
selection, which every page shares."""

from __future__ import annotations

import panel as pn

from engine import Comparison
from explorer.session import Session


def planned_mechanisms(plans: Comparison | None) -> list[str]:
    """The mechanisms with a plan to show, best first (nothing unplanned, not applicable or
    None)."""
    if plans is None:
        return []
    rows = [r for r in plans.rows if r.plan is not None and r.rmse is not None]
    return [r.mechanism for r in sorted(rows, key=lambda r: r.rmse)]


def mechanism_choice(session: Session, css_class: str, width: int) -> pn.widgets.Select:
    """A menu of ``session``'s planned mechanisms whose value is the session's selection
    (choosing one selects it on every page; a selection without a plan shows the best)."""
    choice = pn.widgets.Select(label="Mechanism", options=planned_mechanisms(session.plans),
                               css_classes=[css_class], width=width)

    def offer(*events: object) -> None:
        names = planned_mechanisms(session.plans)
        choice.options = names
        if session.selected in names:
            choice.value = session.selected
        elif names:
            choice.value = names[0]

    choice.param.watch(lambda event: event.new is not None
                       and setattr(session, "selected", event.new), "value")
    session.param.watch(offer, ["plans", "selected"])
    offer()
    return choice
