"""Notebooks speak to the public face only: ``import engine`` / ``from engine import X`` (and the
same for ``explorer``) with X in the package's ``__all__``, and attribute access ``engine.X``
only for such names. A notebook that reaches past the face (``engine.workflows.compare``,
``from explorer.pages import ...``) would break on any refactor, and its reader could not tell
what is public. Read with ``ast``; nothing is run (``tests/test_notebooks_run.py`` runs them).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import engine
import explorer

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PUBLIC = {"engine": set(engine.__all__), "explorer": set(explorer.__all__)}


def code(path: Path) -> str:
    """The notebook's code cells, one after the other (IPython magics dropped)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    lines = [line for cell in cells if cell["cell_type"] == "code"
             for line in "".join(cell["source"]).splitlines()
             if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def offences(source: str) -> list[str]:
    """``line: what`` for every reach past the public face in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [f"{node.lineno}: import {a.name}" for a in node.names
                    if a.name.split(".")[0] in PUBLIC and "." in a.name]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PUBLIC:
            if node.module not in PUBLIC:
                out.append(f"{node.lineno}: from {node.module} import ...")
            else:
                out += [f"{node.lineno}: from {node.module} import {a.name} (not in __all__)"
                        for a in node.names if a.name not in PUBLIC[node.module]]
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id in PUBLIC and node.attr not in PUBLIC[node.value.id]):
            out.append(f"{node.lineno}: {node.value.id}.{node.attr} (not in __all__)")
    return out


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 6


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_imports_only_the_public_face(path: Path) -> None:
    found = offences(code(path))
    assert not found, f"{path.name} reaches past the public face:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path: Path) -> None:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    assert all(not cell.get("outputs") and cell.get("execution_count") is None
               for cell in cells if cell["cell_type"] == "code")


def test_the_checker_catches_deep_imports() -> None:
    source = ("import engine\nfrom engine import compare, Plan\nimport engine.scenario\n"
              "from engine.workflows.compare import compare\nfrom explorer.pages import x\n"
              "from engine import Nope\nengine.workflows\nengine.compare\n")
    assert offences(source) == ["3: import engine.scenario",
                                "4: from engine.workflows.compare import ...",
                                "5: from explorer.pages import ...",
                                "6: from engine import Nope (not in __all__)",
                                "7: engine.workflows (not in __all__)"]
