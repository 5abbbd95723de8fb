"""The generated Python snippet reproduces the explorer's comparison with the engine alone."""

from __future__ import annotations

import contextlib
import io

from explorer.planning.store import PlanStore
from explorer.session import Session
from explorer.snippet import comparison_snippet


def test_snippet_prints_the_same_numbers_as_the_explorer():
    session = Session({"domain": {"age": {"size": 12, "kind": "numeric"}, "sex": 2},
                       "workload": [{"product": {"age": "prefix", "sex": "identity"}}],
                       "privacy": {"noise": "gaussian", "epsilon": 0.5, "delta": 1e-8},
                       "mechanisms": ["identity", "h2", "wavelet"]}, store=PlanStore())
    session.privacy.epsilon = 2.0
    session.compare_now()
    code = comparison_snippet(session.export_spec())
    compile(code, "comparison.py", "exec")

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {"__name__": "__main__"})
    printed = out.getvalue()

    assert "gaussian eps=2 delta=1e-08" in printed
    assert f"SVD lower bound (RMSE): {session.comparison.bound_rmse:.4f}" in printed
    for row in session.comparison.rows:
        assert f"{row.rmse:.4f}" in printed, row.mechanism


def test_snippet_embeds_awkward_text_exactly():
    spec = {"domain": {"q": {"size": 2, "labels": ['say "hi"', "back\\slash"]}},
            "workload": [{"product": {"q": "identity"}}]}
    code = comparison_snippet(spec)
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(code, namespace)
    assert namespace["scenario"].domain["q"].labels == ('say "hi"', "back\\slash")
