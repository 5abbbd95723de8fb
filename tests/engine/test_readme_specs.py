"""Every scenario in README.md and the documentation pages validates (issue 15: the README's own
syntax was rejected).

The rule: a fenced block tagged ``yaml`` or ``json`` whose top level is a mapping with a
``domain`` key is a scenario spec and must parse into a :class:`Scenario`; every other
``yaml``/``json`` block (an output document, a fragment) must still be readable by the spec
reader; blocks in other languages (shell, CSV, untagged) are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.scenario import Scenario
from engine.specfile import load_text

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)]
FENCE = re.compile(r"^( *)```(yaml|json)\n(.*?)^\1```", re.MULTILINE | re.DOTALL)


def _blocks(path: Path = README) -> list[tuple[int, str, str]]:
    text = path.read_text(encoding="utf-8")
    out = []
    for match in FENCE.finditer(text):
        indent = len(match.group(1))
        body = "\n".join(line[indent:] for line in match.group(3).splitlines())
        out.append((text.count("\n", 0, match.start()) + 1, match.group(2), body))
    return out


def _page_blocks() -> list[tuple[str, str, str]]:
    """``(page:line, fmt, body)`` of every yaml/json block of the README and the docs."""
    return [(f"{path.relative_to(ROOT)}:{line}", fmt, body)
            for path in PAGES for line, fmt, body in _blocks(path)]


BLOCKS = _page_blocks()


def test_the_readme_has_a_scenario() -> None:
    specs = [
        b
        for b in _blocks()
        if isinstance(load_text(b[2], b[1]), dict) and "domain" in load_text(b[2], b[1])
    ]
    assert len(specs) >= 1


@pytest.mark.parametrize(
    ("where", "fmt", "body"), BLOCKS, ids=[where for where, _, _ in BLOCKS]
)
def test_readme_block(where: str, fmt: str, body: str) -> None:
    doc = load_text(body, fmt, where=where)
    if isinstance(doc, dict) and "domain" in doc:
        scenario = Scenario.from_spec(doc)
        assert scenario.workload.num_queries > 0
