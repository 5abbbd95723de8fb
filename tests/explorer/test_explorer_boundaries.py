"""Pages and components ask their Session; only the Session reaches the plan store."""

from __future__ import annotations

import ast
from pathlib import Path

EXPLORER = Path(__file__).resolve().parents[2] / "explorer"
#: The plan store's own modules: the Session reads them, pages and components never do.
STORE_MODULES = ("explorer.planning.store", "explorer.planning.settings",
                 "explorer.planning.workers")


def offences(path: Path) -> list[str]:
    """``path:line what`` for every import of a store module and every ``.store`` /
    ``._store`` attribute in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            names = []
        found += [f"{path.name}:{node.lineno} imports {n}" for n in names if n in STORE_MODULES]
        if isinstance(node, ast.Attribute) and node.attr in ("store", "_store"):
            found.append(f"{path.name}:{node.lineno} reads .{node.attr}")
    return found


def test_pages_and_components_never_reach_the_plan_store():
    paths = sorted((EXPLORER / "pages").glob("*.py")) + sorted(
        (EXPLORER / "components").glob("*.py"))
    assert len(paths) > 10
    assert [o for path in paths for o in offences(path)] == []


def test_the_checker_sees_an_import_and_a_store_read(tmp_path):
    page = tmp_path / "page.py"
    page.write_text("from explorer.planning import store\n"
                    "def build(session):\n    return session.store.bound('k')\n")
    assert offences(page) == ["page.py:1 imports explorer.planning.store",
                              "page.py:3 reads .store"]
