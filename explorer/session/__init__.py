"""One :class:`Session` per user: the view-model every page of theirs talks to.

See :mod:`explorer.session.model` for its layers: the scenario and the spec being edited
(:mod:`~explorer.session.editing`), the plans and the comparison (:mod:`~explorer.session.plans`),
and planning what is missing (:mod:`~explorer.session.queue`). :mod:`~explorer.session.spec_text`
turns specs into the editor's YAML and back.
"""

from explorer.session.editing import DEFAULT_SPEC
from explorer.session.model import Session
from explorer.session.spec_text import dump_yaml, parse_yaml

__all__ = ["DEFAULT_SPEC", "Session", "dump_yaml", "parse_yaml"]
