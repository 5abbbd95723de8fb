"""Generate a Python script that reproduces the explorer's comparison with the engine alone.

The script embeds the scenario as YAML (domain, workload, the live privacy level and the
compared mechanisms), plans every mechanism with ``engine.compare`` (the public face) and prints
the same table the Compare page shows, plus the SVD lower bound.

Example:
    >>> text = comparison_snippet({"domain": {"x": 8}, "workload": [{"product": {"x": "prefix"}}],
    ...                            "privacy": {"noise": "laplace", "epsilon": 1.0},
    ...                            "mechanisms": ["identity"]})
    >>> "engine.compare(scenario)" in text
    True
"""

from __future__ import annotations

from typing import Any

import yaml

HEADER = '''"""Reproduce a comparison made in the DP workbench explorer.

Run from the project folder (or anywhere the package is installed): python {filename}
"""
'''

BODY = '''
import engine

SCENARIO = {literal}

scenario = engine.Scenario.loads(SCENARIO)
comparison = engine.compare(scenario)

print(scenario.workload.describe(), "|", scenario.privacy.describe())
bound = comparison.bound_rmse
print("SVD lower bound (RMSE):", "not computable" if bound is None else f"{{bound:.4f}}")
for row in comparison.to_records():
    rmse = "-" if row["rmse"] is None else f"{{row['rmse']:.4f}}"
    ratio = "" if row["ratio_to_bound"] is None else f"{{row['ratio_to_bound']:.2f}} x bound"
    print(f"{{row['mechanism']:>20}}  {{rmse:>12}}  {{ratio:>14}}  {{row['note']}}")
'''


def _literal(text: str) -> str:
    """A Python literal for ``text``: a readable triple-quoted string when that is exact."""
    if '"""' not in text and "\\" not in text and not text.endswith('"'):
        return '"""\\\n' + text + '"""'
    return repr(text)


def comparison_snippet(spec: dict[str, Any], filename: str = "comparison.py") -> str:
    """A runnable script that re-plans the scenario ``spec`` and prints the comparison."""
    text = yaml.safe_dump(spec, sort_keys=False, default_flow_style=None, width=100)
    return HEADER.format(filename=filename) + BODY.format(literal=_literal(text))
