"""Fixtures shared by the engine tests."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

#: A small scenario for command-line release tests: prefix ages by sex, zCDP rho 0.5.
AGE_SEX_SPEC = """
domain: {age: {size: 8, kind: numeric}, sex: 2}
workload:
  - product: {age: prefix, sex: identity}
privacy: {noise: zcdp, rho: 0.5}
"""


@pytest.fixture
def scenario(tmp_path: Path) -> tuple[Path, Path]:
    """``(spec, data)``: :data:`AGE_SEX_SPEC` as a YAML file and 300 seeded people as a CSV."""
    spec = tmp_path / "scenario.yaml"
    spec.write_text(AGE_SEX_SPEC)
    data = tmp_path / "people.csv"
    rng = np.random.default_rng(4)
    with data.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["age", "sex"])
        writer.writerows(zip(rng.integers(0, 8, 300), rng.integers(0, 2, 300), strict=True))
    return spec, data
